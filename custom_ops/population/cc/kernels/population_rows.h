// The rows of a population op's batch, shared by every population op:
// grouping rows by network (Buckets for the GEMM ops, RowRuns for the delta
// ops), and the input checks the ops have in common, each with the one
// error message all of them give.

#ifndef TFRL_CUSTOM_OPS_POPULATION_ROWS_H_
#define TFRL_CUSTOM_OPS_POPULATION_ROWS_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/status.h"

namespace tfrl {
namespace population {

// --- Input checks (InvalidArgument on failure) ---

// `t` (called `name`) is of rank `rank`; `layout` names its dimensions,
// e.g. "[B, H, W, C]".
tensorflow::Status CheckRank(const tensorflow::Tensor& t, int rank, const char* name,
                             const char* layout);

// The kernel_size and stride attrs of a convolution are >= 1.
tensorflow::Status CheckConvAttrs(int64_t kernel_size, int64_t stride);

// An input image of h x w is at least kernel_size x kernel_size.
tensorflow::Status CheckConvInput(int64_t h, int64_t w, int64_t kernel_size);

// w [P, K, N] of a convolution over x [B, H, W, C] has K = k (=
// kernel_size^2 * C, from KernelRows).
tensorflow::Status CheckConvKernel(const tensorflow::Tensor& x, const tensorflow::Tensor& w,
                                   int64_t kernel_size, int64_t k);

// index and active of a GEMM op are both [batch].
tensorflow::Status CheckIndexAndActive(const tensorflow::Tensor& index,
                                       const tensorflow::Tensor& active, int64_t batch);

// `t` (called `name`, e.g. the delta ops' index and fresh) is [batch].
tensorflow::Status CheckRowVector(const tensorflow::Tensor& t, const char* name, int64_t batch);

// The error for index[b] = p outside [0, pop): `pop_from` says where P
// comes from (e.g. "w.shape[0]"), `rows` which rows must be in range ("" for
// all, " for an active row").
tensorflow::Status IndexOutOfRange(int64_t b, int64_t p, int64_t pop, const char* pop_from,
                                   const char* rows);

// Every index[b] (int32, [B]) lies in [0, pop).
tensorflow::Status CheckIndexRange(const tensorflow::Tensor& index, int64_t pop,
                                   const char* pop_from);

// The shape `dims` of an output called `what`, or InvalidArgument when its
// size does not fit in int64 (empty inputs may have huge dimensions, e.g. x
// of shape [1, 2^40, 2^40, 0]; TensorShape's constructor would abort).
tensorflow::Status OutputShape(std::initializer_list<int64_t> dims, const char* what,
                               tensorflow::TensorShape* shape);

// *k = kernel_size^2 * C, a kernel's rows, or InvalidArgument when that
// overflows int64 (possible only for an empty x, whose dimensions may be
// huge).
tensorflow::Status KernelRows(int64_t ks, int64_t c, int64_t* k);

// --- Rows grouped by network ---

// The active rows grouped by network, stable in b: bucket r holds the rows
// order[begin, end) of network p (only networks with active rows have a
// bucket, in increasing p). A sort of the active rows, so that the cost does
// not grow with P (a w of shape [2^40, 0, N] is valid). BucketRows fails on
// an active row whose network index is outside [0, pop).
struct Buckets {
  struct Bucket {
    int64_t p, begin, end;
  };
  std::vector<int64_t> order;
  std::vector<Bucket> buckets;
};

tensorflow::Status BucketRows(const tensorflow::Tensor& index, const tensorflow::Tensor& active,
                              int64_t pop, Buckets* out);

// A batch's rows in network order (stable in b), cut into runs of up to
// max_run rows of one network that are not fresh (a fresh row is a run of
// its own, and with `join` false every row is): run r is
// order[start[r], start[r + 1]). A run's rows share their network's bias
// rows and, in cache, its kernel rows (the delta ops).
struct RowRuns {
  std::vector<int64_t> order, start;
  int64_t count() const { return static_cast<int64_t>(start.size()) - 1; }
  // Run r's rows (batch indices) and how many there are.
  const int64_t* rows(int64_t r) const { return order.data() + start[r]; }
  int size(int64_t r) const { return static_cast<int>(start[r + 1] - start[r]); }
};

template <typename Index, typename Fresh>
RowRuns NetworkRuns(int64_t batch, const Index& idx, const Fresh& fresh, bool join,
                    int64_t max_run) {
  RowRuns runs;
  runs.order.resize(batch);
  for (int64_t b = 0; b < batch; ++b) runs.order[b] = b;
  std::stable_sort(runs.order.begin(), runs.order.end(),
                   [&](int64_t a, int64_t b) { return idx(a) < idx(b); });
  for (int64_t u = 0; u < batch; ++u) {
    const int64_t b = runs.order[u], before = u > 0 ? runs.order[u - 1] : -1;
    const bool joins = join && !runs.start.empty() && u - runs.start.back() < max_run &&
                       !fresh(b) && !fresh(before) && idx(before) == idx(b);
    if (!joins) runs.start.push_back(u);
  }
  runs.start.push_back(batch);
  return runs;
}

}  // namespace population
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_POPULATION_ROWS_H_
