"""The booster's speed against LightGBM: shape by shape (``core``), alone and under load (``load``),
and along rows, features and threads (``scaling``)."""
