"""Grid features from image files: the `extract` step of the captioning recipe.

`extract_grid_features` runs a `keras.applications` backbone without its
classifier over a folder of images and writes each image's last
convolutional map `[H, W, C]` as `<name>.npy`, the per-image layout
`image_features.FolderFeatures` reads, as in "Show, Attend and Tell" (Xu et
al., 2015, arXiv:1502.03044), which attends over a CNN's last conv map.

The default backbone is InceptionResNetV2 (Szegedy et al., 2017,
arXiv:1602.07261): 8x8x1536 at 299 pixels. Nothing is downloaded: the
weights are a local file (Keras' `*_notop.h5` files, or any file
`model.load_weights` reads). Writing is atomic and resumable, so an
interrupted run over COCO's 123,287 images is simply started again.

`keras.applications` and Pillow are used only when the function runs.
"""

import dataclasses
import os
import re
import sys
import time

import numpy as np

from keras_structattn import checks
from keras_structattn.data.json_files import atomic_open

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
NAMINGS = ("stem", "id")
OUTPUT_DTYPES = ("float32", "float16")

# name: (keras.applications constructor, module of its preprocess_input,
# paper). `include_top=False` leaves the last conv map as the output.
BACKBONES = {
    "InceptionResNetV2": ("InceptionResNetV2", "inception_resnet_v2", "arXiv:1602.07261"),
    "ResNet50": ("ResNet50", "resnet50", "arXiv:1512.03385"),
    "EfficientNetB0": ("EfficientNetB0", "efficientnet", "arXiv:1905.11946"),
    "MobileNetV2": ("MobileNetV2", "mobilenet_v2", "arXiv:1801.04381"),
}
# The ImageNet standard deviations Keras' EfficientNet divides by once more
# after its `Normalization` layer when it is built with weights="imagenet"
# (tensorflow/tensorflow#49930); see `_efficientnet_imagenet_scale`.
_IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)
_TRAILING_DIGITS = re.compile(r"(\d+)$")


@dataclasses.dataclass
class ExtractionReport:
    """What `extract_grid_features` did.

    Attributes:
        output_folder: where the `.npy` files are.
        images: images asked for.
        written: feature files written by this run.
        skipped_existing: images whose file was already there (a resumed
            run).
        ignored_files: files of the input folder that are not
            .jpg/.jpeg/.png images.
        feature_shape: `(H, W, C)` of the written maps (None if none
            written).
        seconds: wall time.
    """

    output_folder: str
    images: int = 0
    written: int = 0
    skipped_existing: int = 0
    ignored_files: int = 0
    feature_shape: tuple = None
    seconds: float = 0.0

    def describe(self):
        """One line: counts, shape and speed."""
        shape = "x".join(map(str, self.feature_shape)) if self.feature_shape else "-"
        return (
            f"{self.output_folder}: {self.written} feature maps written ({shape}), "
            f"{self.skipped_existing} already there, of {self.images} images; "
            f"{self.ignored_files} non-image files ignored; {self.seconds:.1f} s"
        )


def _list_images(image_paths_or_folder):
    """`(image paths, number of ignored files)` of a folder or a list of paths."""
    if isinstance(image_paths_or_folder, (str, os.PathLike)):
        folder = os.fspath(image_paths_or_folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"No such image folder: {folder!r}")
        paths, ignored = [], 0
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if not entry.is_file():
                continue
            if os.path.splitext(entry.name)[1].lower() in IMAGE_EXTENSIONS:
                paths.append(entry.path)
            else:
                ignored += 1
        if not paths:
            raise ValueError(
                f"{folder}: no image file ({'/'.join(IMAGE_EXTENSIONS)}); "
                f"{ignored} other files."
            )
        return paths, ignored
    paths = [os.fspath(p) for p in image_paths_or_folder]
    if not paths:
        raise ValueError("Argument `image_paths_or_folder` is an empty list: no image.")
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No such image file: {path!r}")
    return paths, 0


def _output_names(paths, naming):
    """`{image path: output file name}`; two images with one name are an error."""
    names, owner = {}, {}
    for path in paths:
        stem = os.path.splitext(os.path.basename(path))[0]
        if naming == "id":
            match = _TRAILING_DIGITS.search(stem)
            if match is None:
                raise ValueError(
                    f"{path}: naming='id' needs an image id at the end of the file name "
                    "(e.g. COCO_val2014_000000000123.jpg); use naming='stem'."
                )
            stem = str(int(match.group(1)))
        name = f"{stem}.npy"
        if name in owner:
            raise ValueError(
                f"{owner[name]} and {path} would both be written to {name}; rename one of "
                "them (or use the other `naming`)."
            )
        owner[name] = path
        names[path] = name
    return names


def _check_weights(weights):
    if weights is None:
        return None
    if isinstance(weights, str) and weights == "imagenet":
        raise ValueError(
            "Argument `weights` must be the path of a local weights file: nothing is "
            "downloaded here. Received: weights='imagenet'. Download the backbone's "
            "*_notop.h5 file once (Keras keeps it under ~/.keras/models) and pass its path."
        )
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError(
            "Argument `weights` must be the path of a local weights file, or None for random "
            f"weights. Received: weights={weights!r:.80}"
        )
    path = os.fspath(weights)
    if not os.path.isfile(path):
        raise ValueError(
            f"Argument `weights`: no such file {path!r}; pass a local weights file (e.g. "
            "Keras' *_notop.h5 file of the backbone)."
        )
    return path


def _efficientnet_imagenet_scale(model):
    """Gives a Keras EfficientNet built without weights="imagenet" that model's input scaling.

    Built with weights="imagenet", Keras' EfficientNet adds a `Rescaling` by
    1/sqrt(std) after its `Normalization` layer (whose stored variance is the
    ImageNet std, tensorflow/tensorflow#49930); built for a weights file, it
    does not, and the features would come from mis-scaled inputs. Dividing
    by sqrt(variance * std) is the same affine map, so the variance is scaled
    instead.
    """
    import keras

    layer = next(
        layer for layer in model.layers if isinstance(layer, keras.layers.Normalization)
    )
    variance = keras.ops.convert_to_numpy(layer.adapt_variance)
    layer.adapt_variance.assign(variance * np.asarray(_IMAGENET_STDDEV_RGB, variance.dtype))
    layer.finalize_state()


def build_backbone(backbone, image_size, weights, backbone_kwargs=None):
    """The backbone without its classifier, and its `preprocess_input`.

    Args:
        backbone: a key of `BACKBONES`.
        image_size: the square input side in pixels.
        weights: a local weights file, or None (random weights: for tests).
        backbone_kwargs: extra constructor arguments (e.g. `{"alpha": 0.35}`
            for MobileNetV2).

    Returns:
        `(model, preprocess_input)`.
    """
    import keras

    checks.one_of("backbone", backbone, BACKBONES)
    checks.positive_int("image_size", image_size)
    weights = _check_weights(weights)
    constructor, module, _ = BACKBONES[backbone]
    model = getattr(keras.applications, constructor)(
        include_top=False,
        weights=None,
        input_shape=(image_size, image_size, 3),
        **(backbone_kwargs or {}),
    )
    if weights is not None:
        try:
            model.load_weights(weights)
        except (ValueError, OSError, KeyError) as e:
            raise ValueError(
                f"{weights}: could not load the weights into {backbone} at {image_size} "
                f"pixels ({type(e).__name__}: {e})."
            ) from None
        if backbone.startswith("EfficientNet"):
            _efficientnet_imagenet_scale(model)
    preprocess = getattr(keras.applications, module).preprocess_input
    return model, preprocess


def load_image(path, image_size):
    """An image file as float32 RGB `[image_size, image_size, 3]` in [0, 255].

    Read with Pillow, converted to RGB (grey and CMYK images included) and
    resized with bilinear interpolation, without keeping the aspect ratio.

    Args:
        path: the image file.
        image_size: the output side.

    Returns:
        float32 `[image_size, image_size, 3]`.

    Raises:
        ValueError: naming the file, if Pillow cannot read it.
    """
    from PIL import Image

    try:
        with Image.open(path) as image:
            image = image.convert("RGB").resize((image_size, image_size), Image.BILINEAR)
            return np.asarray(image, np.float32)
    except (OSError, ValueError, SyntaxError) as e:  # UnidentifiedImageError is an OSError
        raise ValueError(f"{path}: not a readable image ({type(e).__name__}: {e}).") from None


def read_images(folder, file_names, image_ids):
    """RGB images read from a folder by file name (for pictures).

    Args:
        folder: the images' folder.
        file_names: the images' file names (only the base names are used).
        image_ids: their image ids, for the messages.

    Returns:
        A list of uint8 `[H, W, 3]` arrays.

    Raises:
        FileNotFoundError: naming the image id and the missing file.
    """
    from PIL import Image

    images = []
    for image_id, name in zip(image_ids, file_names):
        path = os.path.join(folder, os.path.basename(name))
        if not os.path.exists(path):
            raise FileNotFoundError(f"image {image_id}: no file {path}")
        with Image.open(path) as image:
            images.append(np.asarray(image.convert("RGB")))
    return images


def images_by_id(folder, image_ids):
    """RGB images of a folder of image files named by image id: the digits
    at the end of the file's stem (`COCO_val2014_000000000042.jpg`, `42.png`).

    Args:
        folder: the images' folder.
        image_ids: the image ids to read.

    Returns:
        A list of uint8 `[H, W, 3]` arrays.

    Raises:
        FileNotFoundError: if an image id has no file.
    """
    index = {}
    for name in sorted(os.listdir(folder)):
        match = _TRAILING_DIGITS.search(os.path.splitext(name)[0])
        if match:
            index.setdefault(int(match.group(1)), name)
    missing = [i for i in image_ids if i not in index]
    if missing:
        raise FileNotFoundError(f"{folder}: no image file for image id {missing[0]} "
                                f"({len(missing)} missing)")
    return read_images(folder, [index[i] for i in image_ids], image_ids)


def _save_atomically(path, array):
    with atomic_open(path, "wb") as f:
        np.save(f, array, allow_pickle=False)


def extract_grid_features(
    image_paths_or_folder,
    output_folder,
    *,
    weights,
    backbone="InceptionResNetV2",
    image_size=299,
    batch_size=16,
    naming="stem",
    backbone_kwargs=None,
    dtype="float32",
    progress_every=500,
):
    """Writes one grid feature map `<name>.npy` `[H, W, C]` per image.

    Each image is read with Pillow as RGB, resized to `image_size` squared
    (bilinear), passed through the backbone's own `preprocess_input` and the
    backbone without its classifier (`include_top=False`), and its last
    conv map is saved (8x8x1536 for InceptionResNetV2 at 299). Each file is
    written to a temporary name and renamed, so a file that exists is
    complete: images whose file exists are skipped (the run resumes). A
    progress line goes to stderr every `progress_every` images.

    Args:
        image_paths_or_folder: a folder (its .jpg/.jpeg/.png files, not
            recursive) or a list of image paths.
        output_folder: where to write (created).
        weights: the path of a local weights file for the backbone
            (keyword-only; "imagenet" is refused: nothing is downloaded), or
            None for random initialisation (for tests only).
        backbone: "InceptionResNetV2" (default, arXiv:1602.07261),
            "ResNet50" (arXiv:1512.03385), "EfficientNetB0"
            (arXiv:1905.11946) or "MobileNetV2" (arXiv:1801.04381).
        image_size: input side in pixels (299 for InceptionResNetV2).
        batch_size: images per forward pass (the last batch is padded, so
            every pass has one shape).
        naming: "stem" (`COCO_val2014_000000000123.jpg` ->
            `COCO_val2014_000000000123.npy`) or "id" (the trailing digits,
            -> `123.npy`).
        backbone_kwargs: extra constructor arguments, e.g. `{"alpha": 0.35}`.
        dtype: "float32" or "float16" (half the disk; the stores read it
            back as float32).
        progress_every: images between progress lines (a positive int).

    Returns:
        An `ExtractionReport`.

    Raises:
        FileNotFoundError: for a missing folder or image.
        ValueError: for `weights="imagenet"` or a missing weights file, an
            unreadable image (names it), two images with one output name,
            or a bad argument.
    """
    start = time.perf_counter()
    checks.one_of("backbone", backbone, BACKBONES)
    checks.positive_int("image_size", image_size)
    checks.positive_int("batch_size", batch_size)
    checks.positive_int("progress_every", progress_every)
    checks.one_of("naming", naming, NAMINGS)
    checks.one_of("dtype", dtype, OUTPUT_DTYPES)
    _check_weights(weights)
    paths, ignored = _list_images(image_paths_or_folder)
    names = _output_names(paths, naming)
    output_folder = os.fspath(output_folder)
    os.makedirs(output_folder, exist_ok=True)
    report = ExtractionReport(output_folder, images=len(paths), ignored_files=ignored)
    todo = [p for p in paths if not os.path.isfile(os.path.join(output_folder, names[p]))]
    report.skipped_existing = len(paths) - len(todo)
    model = None
    for begin in range(0, len(todo), batch_size):
        chunk = todo[begin : begin + batch_size]
        batch = np.zeros((batch_size, image_size, image_size, 3), np.float32)
        for row, path in enumerate(chunk):
            batch[row] = load_image(path, image_size)
        if model is None:  # after the first images read: a bad image fails fast
            model, preprocess = build_backbone(backbone, image_size, weights, backbone_kwargs)
        maps = np.asarray(model.predict_on_batch(preprocess(batch)))[: len(chunk)]
        if not np.isfinite(maps).all():
            raise ValueError(
                f"{backbone} gave NaN or infinite features for a batch starting at "
                f"{chunk[0]} (check the weights file)."
            )
        for path, feature_map in zip(chunk, maps):
            _save_atomically(os.path.join(output_folder, names[path]), feature_map.astype(dtype))
        report.written += len(chunk)
        report.feature_shape = tuple(maps.shape[1:])
        done = begin + len(chunk)
        if done // progress_every > begin // progress_every or done == len(todo):
            rate = report.written / max(time.perf_counter() - start, 1e-9)
            print(
                f"extract_grid_features: {done}/{len(todo)} images written "
                f"({report.skipped_existing} already there), {rate:.1f} images/s",
                file=sys.stderr,
                flush=True,
            )
    report.seconds = time.perf_counter() - start
    return report
