"""The basic kernels of the AutoTiler, one module per op family (``convolution``,
``pooling``, ``linear``, ``elementwise``, ``softmax``, ``normalisation``, ``movement``), each
kernel's C template next to the numpy reference that computes the same values, sharing the
fixed-point and float32 helpers of ``common``."""
