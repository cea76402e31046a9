"""Compile and link options of every op library: TensorFlow's own (tf.sysconfig,
written by `python setup.py configure_bazel`) plus the optimisation level."""

load("//third_party_local/config:tf_flags.bzl", "TF_COPTS", "TF_LINKOPTS")

OP_COPTS = TF_COPTS + [
    "-O3",
    "-Wno-deprecated-declarations",
]

OP_LINKOPTS = TF_LINKOPTS
