"""Shared pytest setup: quiet TensorFlow before any test imports Keras."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
