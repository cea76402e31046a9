"""The values of every --precision flag, in a module without TensorFlow.

Configs check their flags before TensorFlow is imported (a bad flag fails in
a second, not after TensorFlow's import), so the names live apart from
tfrl.precision, which resolves and reports them with TensorFlow.
"""

CHOICES = ("auto", "float32", "bfloat16")
