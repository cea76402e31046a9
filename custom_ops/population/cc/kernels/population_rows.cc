// Row grouping and shared input checks of the population ops; see
// population_rows.h.

#include "population_rows.h"

#include "absl/strings/str_join.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/util/overflow.h"

namespace tfrl {
namespace population {

using tensorflow::OkStatus;
using tensorflow::Status;
using tensorflow::Tensor;
using tensorflow::TensorShape;
namespace errors = tensorflow::errors;

Status CheckRank(const Tensor& t, int rank, const char* name, const char* layout) {
  if (t.dims() == rank) return OkStatus();
  return errors::InvalidArgument(name, " must be rank ", rank, " ", layout, ", got shape ",
                                 t.shape().DebugString());
}

Status CheckConvAttrs(int64_t kernel_size, int64_t stride) {
  if (kernel_size >= 1 && stride >= 1) return OkStatus();
  return errors::InvalidArgument("kernel_size and stride must be >= 1, got ", kernel_size,
                                 " and ", stride);
}

Status CheckConvInput(int64_t h, int64_t w, int64_t kernel_size) {
  if (h >= kernel_size && w >= kernel_size) return OkStatus();
  return errors::InvalidArgument("x spatial size ", h, "x", w, " is smaller than kernel_size ",
                                 kernel_size);
}

Status CheckConvKernel(const Tensor& x, const Tensor& w, int64_t kernel_size, int64_t k) {
  if (w.dim_size(1) == k) return OkStatus();
  return errors::InvalidArgument("w.shape[1] must be kernel_size^2 * C = ", k, ": got w shape ",
                                 w.shape().DebugString(), " for x shape ",
                                 x.shape().DebugString(), " and kernel_size ", kernel_size);
}

Status CheckIndexAndActive(const Tensor& index, const Tensor& active, int64_t batch) {
  if (index.dims() != 1)
    return errors::InvalidArgument("index must be rank 1 [B], got shape ",
                                   index.shape().DebugString());
  if (active.dims() != 1)
    return errors::InvalidArgument("active must be rank 1 [B], got shape ",
                                   active.shape().DebugString());
  if (index.dim_size(0) != batch)
    return errors::InvalidArgument("index must have B = ", batch, " entries (x.shape[0]), got ",
                                   index.dim_size(0));
  if (active.dim_size(0) != batch)
    return errors::InvalidArgument("active must have B = ", batch, " entries (x.shape[0]), got ",
                                   active.dim_size(0));
  return OkStatus();
}

Status CheckRowVector(const Tensor& t, const char* name, int64_t batch) {
  if (t.dims() == 1 && t.dim_size(0) == batch) return OkStatus();
  return errors::InvalidArgument(name, " must be [B] = [", batch, "], got shape ",
                                 t.shape().DebugString());
}

Status IndexOutOfRange(int64_t b, int64_t p, int64_t pop, const char* pop_from,
                       const char* rows) {
  return errors::InvalidArgument("index[", b, "] = ", p,
                                 " is out of range: expected a value in [0, ", pop, ") (",
                                 pop_from, " = P)", rows);
}

Status CheckIndexRange(const Tensor& index, int64_t pop, const char* pop_from) {
  const auto idx = index.flat<tensorflow::int32>();
  for (int64_t b = 0; b < idx.size(); ++b) {
    if (idx(b) < 0 || idx(b) >= pop) return IndexOutOfRange(b, idx(b), pop, pop_from, "");
  }
  return OkStatus();
}

Status OutputShape(std::initializer_list<int64_t> dims, const char* what, TensorShape* shape) {
  const Status status = TensorShape::BuildTensorShape(dims, shape);
  if (status.ok()) return status;
  return errors::InvalidArgument(what, " would have shape [", absl::StrJoin(dims, ", "),
                                 "], too many elements: ", status.message());
}

Status KernelRows(int64_t ks, int64_t c, int64_t* k) {
  *k = tensorflow::MultiplyWithoutOverflow(tensorflow::MultiplyWithoutOverflow(ks, ks), c);
  if (*k >= 0) return OkStatus();
  return errors::InvalidArgument("kernel_size^2 * C = ", ks, "^2 * ", c,
                                 " does not fit in int64");
}

Status BucketRows(const Tensor& index, const Tensor& active, int64_t pop, Buckets* out) {
  const int64_t batch = index.dim_size(0);
  const auto idx = index.flat<tensorflow::int32>();
  const auto act = active.flat<bool>();
  std::vector<int64_t>& order = out->order;
  order.clear();
  out->buckets.clear();
  for (int64_t b = 0; b < batch; ++b) {
    if (!act(b)) continue;
    const tensorflow::int32 p = idx(b);
    if (p < 0 || p >= pop) return IndexOutOfRange(b, p, pop, "w.shape[0]", " for an active row");
    order.push_back(b);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&idx](int64_t a, int64_t b) { return idx(a) < idx(b); });
  for (int64_t r = 0; r < static_cast<int64_t>(order.size()); ++r) {
    const int64_t p = idx(order[r]);
    if (out->buckets.empty() || out->buckets.back().p != p) {
      out->buckets.push_back({p, r, r + 1});
    } else {
      out->buckets.back().end = r + 1;
    }
  }
  return OkStatus();
}

}  // namespace population
}  // namespace tfrl
