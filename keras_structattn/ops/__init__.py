"""Backend-agnostic tensor functions (keras.ops only)."""

from keras_structattn.ops.attend_areas import area_attention
from keras_structattn.ops.attend_areas import area_keys
from keras_structattn.ops.attend_areas import attend_to_areas
from keras_structattn.ops.areas import area_coordinates
from keras_structattn.ops.areas import AreaLayout
from keras_structattn.ops.areas import area_features
from keras_structattn.ops.areas import area_fold
from keras_structattn.ops.areas import area_layout
from keras_structattn.ops.areas import area_slots
from keras_structattn.ops.areas import areas_to_slots
from keras_structattn.ops.areas import fold_area_slots
from keras_structattn.ops.areas import slots_to_areas
from keras_structattn.ops.areas import area_reduce
from keras_structattn.ops.areas import area_shapes
from keras_structattn.ops.areas import area_sizes
from keras_structattn.ops.areas import num_areas
from keras_structattn.ops.positions import timing_signal
