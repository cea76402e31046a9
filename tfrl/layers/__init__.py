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

from tfrl import lazy_names

# Each name's module, imported when the name is first asked for: the entry
# points read `tfrl.layers.spec` and `tfrl.layers.flags` to parse their flags,
# and a bad flag is answered before TensorFlow (seconds of import) is loaded.
_MODULES = {
    "BlockCirculantDense": "circulant",
    "CompressionTracker": "compression",
    "Conv2D": "dense",
    "Dense": "dense",
    "GSTDense": "gst",
    "Layer": "base",
    "LayerPlan": "spec",
    "LayerSpec": "spec",
    "PackedKernel": "pruned",
    "PrunedConv2D": "pruned",
    "PrunedDense": "pruned",
    "RewardAwareConfig": "reward_aware_config",
    "RewardAwareController": "gst",
    "after_apply": "factory",
    "after_update": "factory",
    "compression_report": "compression",
    "copy_variables": "export",
    "layers_of": "factory",
    "make_conv2d": "factory",
    "make_dense": "factory",
    "pack": "export",
}

__all__ = [
    "BlockCirculantDense", "CompressionTracker", "Conv2D", "Dense", "GSTDense", "Layer",
    "LayerPlan", "LayerSpec", "PackedKernel", "PrunedConv2D", "PrunedDense",
    "RewardAwareConfig", "RewardAwareController", "after_apply", "after_update",
    "compression_report", "copy_variables", "layers_of", "make_conv2d", "make_dense", "pack",
]

__getattr__ = lazy_names.getattr_of(__name__, _MODULES)
