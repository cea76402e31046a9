"""tfrl layers: dense, block-circulant, pruned and GST variants (tf.Module, no Keras).

Public API:
  LayerSpec, LayerPlan                      -- what to build (spec.py)
  make_dense, make_conv2d, after_update     -- build by spec / post-step hook
  after_apply                               -- refresh right after each optimizer step
  Dense, Conv2D, BlockCirculantDense, PrunedDense, PrunedConv2D, GSTDense
  RewardAwareController, RewardAwareConfig  -- GST's reward-aware pruning
  compression_report, CompressionTracker    -- GST's compression metric
  pack                                      -- compact form for SavedModel export
Flags: `tfrl.layers.flags.define_layer_flags`, `layer_plan_from_flags`.
"""

from tfrl.layers.base import Layer
from tfrl.layers.circulant import BlockCirculantDense
from tfrl.layers.compression import CompressionTracker
from tfrl.layers.compression import compression_report
from tfrl.layers.dense import Conv2D
from tfrl.layers.dense import Dense
from tfrl.layers.export import copy_variables
from tfrl.layers.export import pack
from tfrl.layers.factory import after_apply
from tfrl.layers.factory import after_update
from tfrl.layers.factory import layers_of
from tfrl.layers.factory import make_conv2d
from tfrl.layers.factory import make_dense
from tfrl.layers.gst import GSTDense
from tfrl.layers.gst import RewardAwareConfig
from tfrl.layers.gst import RewardAwareController
from tfrl.layers.pruned import PackedKernel
from tfrl.layers.pruned import PrunedConv2D
from tfrl.layers.pruned import PrunedDense
from tfrl.layers.spec import LayerPlan
from tfrl.layers.spec import LayerSpec

__all__ = [
    "BlockCirculantDense", "CompressionTracker", "Conv2D", "Dense", "GSTDense", "Layer",
    "LayerPlan", "LayerSpec", "PackedKernel", "PrunedConv2D", "PrunedDense",
    "RewardAwareConfig", "RewardAwareController", "after_apply", "after_update",
    "compression_report", "copy_variables", "layers_of", "make_conv2d", "make_dense", "pack",
]
