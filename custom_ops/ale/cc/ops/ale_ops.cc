// Registrations of the ALE ops: a batch of Atari emulators as a TF resource,
// and reset / step / observe over any subset of its slots.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

REGISTER_OP("AleEnvCreate")
    .Output("handle: resource")
    .Attr("game: string")
    .Attr("rom_directory: string")
    .Attr("num_envs: int >= 1")
    .Attr("frame_skip: int >= 1 = 4")
    .Attr("max_pool: bool = true")
    .Attr("grayscale: bool = true")
    .Attr("resize: bool = true")
    .Attr("height: int >= 1 = 84")
    .Attr("width: int >= 1 = 84")
    .Attr("stack: int >= 1 = 4")
    .Attr("noop_max: int >= 0 = 30")
    .Attr("fire_reset: bool = true")
    .Attr("repeat_action_probability: float = 0.0")
    .Attr("full_action_space: bool = false")
    .Attr("episodic_life: bool = false")
    .Attr("max_episode_frames: int >= 0 = 108000")
    .Attr("max_episode_steps: int >= 0 = 0")
    .Attr("seed: int = 0")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc(R"doc(
Creates `num_envs` Atari emulators for one game and returns their handle.

Each call makes a new batch; destroy it with DestroyResourceOp. The ROM is
`<rom_directory>/<game>.bin` (ale-py's ROM directory). Slot i is seeded with
SlotSeed(seed, i) = (seed * 1000003 + i) mod 2^31, for ALE's own generator
(sticky actions) and for the no-op starts. Every slot needs AleReset before
its first AleStep.

game: ALE ROM id, e.g. "pong" or "space_invaders".
rom_directory: directory that holds the ROM files.
num_envs: 1..4096 emulators.
frame_skip: emulator frames per agent step (1..1000); rewards are summed
  over them.
max_pool: observe the max of the last two frames of a step (removes flicker).
grayscale: ALE's luminance (1 channel) rather than RGB (3 channels).
resize: resize to height x width by area averaging; false keeps 210x160.
stack: frames stacked on the channel axis (1..64), oldest first; all slots'
  stacked observations together may take at most 8 GiB.
noop_max: on reset, take uniform 1..noop_max no-op frames (0: none; at most
  100000).
fire_reset: on reset, press FIRE for one step in games that need it.
repeat_action_probability: ALE's sticky actions (0.25 in the v5 protocol).
full_action_space: the 18 legal actions rather than the game's minimal set.
episodic_life: a lost life reports terminated (the game goes on).
max_episode_frames: emulator frames after which an episode is truncated, counted
  by ALE from the reset (its no-op and FIRE frames included); 0: no cap.
max_episode_steps: steps after which an episode is truncated, counted from its
  first step (as gymnasium's TimeLimit); 0: no cap.
)doc");

REGISTER_OP("AleReset")
    .Input("handle: resource")
    .Input("indices: int32")
    .Input("seeds: int64")
    .Attr("only_played: bool = false")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &unused));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Resets the slots in `indices` (no-op starts and FIRE as configured).

seeds: empty, or one seed in [0, 2^31) per index. An empty vector continues
  each slot's own random streams. A seed re-seeds the slot's streams (its
  no-op count, ALE's sticky actions and the emulator's power-on RAM) before
  the reset, so that the new game depends on that seed only, not on what the
  slot played before; always a real reset (only_played is ignored).
only_played: leave alone the slots still at the start of a game they have not
  stepped in (just reset, or auto-reset when their last game ended), whose
  reset would only spend the reset sequence's emulator frames again.
)doc");

REGISTER_OP("AleStep")
    .Input("handle: resource")
    .Input("indices: int32")
    .Input("actions: int32")
    .Output("reward: float")
    .Output("terminated: bool")
    .Output("truncated: bool")
    .Output("game_over: bool")
    .Attr("auto_reset: bool = true")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused, indices, actions;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &actions));
      TF_RETURN_IF_ERROR(c->Merge(indices, actions, &indices));
      for (int i = 0; i < 4; ++i) c->set_output(i, indices);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Steps the slots in `indices` with `actions` (indices into the action set),
spread over the intra-op thread pool. A slot whose game is over or whose
episode reached a cap (max_episode_frames, max_episode_steps) is reset at once
when `auto_reset`, so its next observation is the first of a new game;
otherwise it keeps its final
observation and must be reset before its next step.

reward: sum of the raw rewards over the frame skip.
terminated: the game is over (or, with episodic_life, a life was lost).
truncated: the episode reached max_episode_frames or max_episode_steps.
game_over: the game ended or was truncated (and, with auto_reset, the slot
  started a new one).
)doc");

REGISTER_OP("AleObserve")
    .Input("handle: resource")
    .Input("indices: int32")
    .Output("observation: uint8")
    .Attr("height: int >= 1")
    .Attr("width: int >= 1")
    .Attr("channels: int >= 1")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused, indices;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      int64_t height, width, channels;
      TF_RETURN_IF_ERROR(c->GetAttr("height", &height));
      TF_RETURN_IF_ERROR(c->GetAttr("width", &width));
      TF_RETURN_IF_ERROR(c->GetAttr("channels", &channels));
      c->set_output(0, c->MakeShape({c->Dim(indices, 0), height, width, channels}));
      return absl::OkStatus();
    })
    .Doc(R"doc(
The stacked observations of the slots in `indices`: uint8
[len(indices), height, width, channels], channels = stack x (1 or 3), oldest
frame first. height, width and channels must match the batch (they give the
static shape).
)doc");

REGISTER_OP("AleActionSet")
    .Input("handle: resource")
    .Output("actions: int32")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
The ALE action ids of the batch's action set; agent action i means actions[i].
)doc");

REGISTER_OP("AleKernelInfo")
    .Output("path: string")
    .Output("ran: bool")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Vector(4));
      c->set_output(1, c->Vector(4));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Which builds of the observation pipeline ran in this process.

Two steps have a SIMD build picked at run time: the palette-to-grey-level
conversion (with the max-pool), AVX-512 VBMI where the CPU has it, and the
area resize, AVX2 where the CPU has it. The environment variable
TFRL_ALE_NO_SIMD (any value, read once) forces the portable build of both.

path: ['grey_levels_avx512_vbmi', 'grey_levels_portable', 'resize_avx2',
  'resize_portable'].
ran: whether each ran (for any batch) since the library was loaded.
)doc");

}  // namespace tensorflow
