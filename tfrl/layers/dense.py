"""Plain dense and 2-D convolution layers (the uncompressed baselines)."""

import tensorflow as tf

from tfrl.layers import base


def flatten_leading(x: tf.Tensor):
  """Reshapes [..., d] to [N, d]; returns the flat tensor and a restore fn."""
  if x.shape.rank == 2:
    return x, lambda y: y
  lead = tf.shape(x)[:-1]
  flat = tf.reshape(x, [-1, x.shape[-1]])
  return flat, lambda y: tf.reshape(y, tf.concat([lead, tf.shape(y)[-1:]], 0))


class Dense(base.Layer):
  """y = activation(x @ kernel + bias), kernel Glorot-uniform, bias zeros.

  Args:
    units: output size (positive int).
    activation: None, a name (`relu`, `tanh`) or a callable.
    with_bias: whether to add a bias.
    kernel_scale: multiplies the initial kernel (e.g. 0.01 for policy heads).
    name: module name.
  """

  def __init__(self, units: int, *, activation=None, with_bias=True,
               kernel_scale: float = 1.0, name=None):
    super().__init__(activation=activation, name=name)
    base.check_positive_int("units", units, type(self).__name__)
    self.units = units
    self.with_bias = with_bias
    self.kernel_scale = float(kernel_scale)

  def _build(self, input_shape):
    if input_shape.rank is None or input_shape[-1] is None:
      raise ValueError(f"{self.name}: last input dimension must be known, got {input_shape}.")
    self.input_size = int(input_shape[-1])
    self.kernel = tf.Variable(
        self.kernel_scale * base.glorot_uniform(
            [self.input_size, self.units], self.input_size, self.units), name="kernel")
    if self.with_bias:
      self.bias = tf.Variable(tf.zeros([self.units]), name="bias")

  def _kernel(self):
    return self.kernel

  def _forward(self, x):
    flat, restore = flatten_leading(x)
    y = tf.matmul(flat, tf.cast(self._kernel(), flat.dtype))
    if self.with_bias:
      y = y + tf.cast(self.bias, y.dtype)
    return restore(y)

  def kernel_stats(self):
    n = self.input_size * self.units
    return n, tf.constant(float(n)), tf.constant(4.0 * n)


def _pair(value, what, cls):
  if isinstance(value, int):
    value = (value, value)
  value = tuple(value)
  if len(value) != 2 or any(not isinstance(v, int) or v < 1 for v in value):
    raise ValueError(f"{cls}: {what} must be a positive int or pair, got {value!r}.")
  return value


class Conv2D(base.Layer):
  """2-D convolution on NHWC inputs with a [kh, kw, in, out] kernel.

  Args:
    filters: output channels.
    kernel_size: int or (kh, kw).
    stride: int or (sh, sw).
    padding: `SAME` or `VALID`.
  """

  def __init__(self, filters: int, kernel_size, stride=1, *, padding="VALID",
               activation=None, with_bias=True, name=None):
    super().__init__(activation=activation, name=name)
    cls = type(self).__name__
    base.check_positive_int("filters", filters, cls)
    self.filters = filters
    self.kernel_size = _pair(kernel_size, "kernel_size", cls)
    self.stride = _pair(stride, "stride", cls)
    if padding not in ("SAME", "VALID"):
      raise ValueError(f"{cls}: padding must be SAME or VALID, got {padding!r}.")
    self.padding = padding
    self.with_bias = with_bias

  def _build(self, input_shape):
    if input_shape.rank != 4 or input_shape[-1] is None:
      raise ValueError(f"{self.name}: expected NHWC input with known channels, got {input_shape}.")
    self.input_channels = int(input_shape[-1])
    kh, kw = self.kernel_size
    fan_in = kh * kw * self.input_channels
    fan_out = kh * kw * self.filters
    self.kernel = tf.Variable(
        base.glorot_uniform([kh, kw, self.input_channels, self.filters], fan_in, fan_out),
        name="kernel")
    if self.with_bias:
      self.bias = tf.Variable(tf.zeros([self.filters]), name="bias")

  def _kernel(self):
    return self.kernel

  def _forward(self, x):
    y = tf.nn.conv2d(x, tf.cast(self._kernel(), x.dtype), strides=(1,) + self.stride + (1,),
                     padding=self.padding)
    if self.with_bias:
      y = y + tf.cast(self.bias, y.dtype)
    return y

  def kernel_stats(self):
    n = int(self.kernel.shape.num_elements())
    return n, tf.constant(float(n)), tf.constant(4.0 * n)
