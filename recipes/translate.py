"""Translation with a tensor2tensor-style Transformer (optionally with area attention).

    python -m recipes.translate                 # = train, then evaluate
    python -m recipes.translate train    [flags]
    python -m recipes.translate evaluate [flags]  # sacreBLEU + chrF on the test set
    python -m recipes.translate decode   --input_file in.txt --output_file out.txt
    python -m recipes.translate average  --last 5  # average the last checkpoints
    python -m recipes.translate export   # SavedModel: raw strings -> translations
    python -m recipes.translate record   # the training batches, for `train --recorded`

With no data flags it trains on the Tatoeba English-German subset that ships
with the package (CC BY 2.0 FR, see keras_structattn/data/tatoeba_en_de/
NOTICE.md): `transformer_tiny_area` (area attention of width 3 in both
layers), a joint SentencePiece vocabulary, 900 steps (about 7 minutes on
2 CPU cores),
then beam-search decoding of the test split, scored with sacreBLEU against
all references of each English source.

Everything lives in `--output_dir`: the resolved hparams (`hparams.json`,
reloaded by the other subcommands), the vocabulary, weights checkpoints
(with the optimizer state, written atomically: a `train` killed at any
moment resumes from its last checkpoint when run again) and TensorBoard logs
(`tensorboard --logdir DIR/logs`).
"""

import argparse
import glob
import json
import os
import sys
import time
import typing

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_structattn import checkpoints as checkpoints_lib  # noqa: E402
from keras_structattn import hparams as hparams_lib  # noqa: E402
from keras_structattn.callbacks import EpochCheckpoints  # noqa: E402
from keras_structattn.callbacks import restore_latest  # noqa: E402
from keras_structattn.data import batching  # noqa: E402
from keras_structattn.data import parallel_text  # noqa: E402
from keras_structattn.data import recorded as recorded_lib  # noqa: E402
from keras_structattn.data import tatoeba  # noqa: E402
from keras_structattn.data import vocab as vocab_lib  # noqa: E402
from keras_structattn.losses import PaddedAccuracy  # noqa: E402
from keras_structattn.losses import PaddedCrossEntropy  # noqa: E402
from keras_structattn.metrics import corpus_bleu  # noqa: E402
from keras_structattn.metrics import corpus_chrf  # noqa: E402
from keras_structattn.metrics.text import group_references  # noqa: E402
from keras_structattn.schedules import WarmupRsqrtDecay  # noqa: E402
from keras_structattn.translation import string_translator  # noqa: E402
from keras_structattn.translation import translate_sentences  # noqa: E402
from models.lstm_seq2seq import LSTMSeq2Seq  # noqa: E402
from models.transformer import Transformer  # noqa: E402

DEFAULT_OUTPUT_DIR = os.path.join("runs", "translate_tatoeba")
DEFAULT_HPARAMS_SET = "transformer_tiny_area"
DEFAULT_LSTM_HPARAMS_SET = "lstm_area_attention_base"
MODELS = {"transformer": Transformer, "lstm": LSTMSeq2Seq}
# Applied to the default set only: the t2t defaults are for WMT-sized runs
# (8000 warm-up steps, batches of 4096 tokens, sentences up to 256 tokens).
DEFAULT_SET_OVERRIDES = "learning_rate_warmup_steps=400,batch_size=2048,max_length=48"

COMMANDS = ("train", "evaluate", "decode", "average", "export", "record")
SPLITS = ("train", "dev", "test")


# ------------------------------------------------------------------- flags


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m recipes.translate",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 1)[1],
    )
    parser.add_argument("command", nargs="?", default="train", choices=COMMANDS)
    parser.add_argument("--output_dir", default=DEFAULT_OUTPUT_DIR)
    parser.add_argument("--model", choices=sorted(MODELS),
                        help="the model family (default: the hparams set's)")
    parser.add_argument("--hparams_set", default=None,
                        help=f"default {DEFAULT_HPARAMS_SET} ({DEFAULT_LSTM_HPARAMS_SET} with "
                        f"--model lstm); one of: {', '.join(hparams_lib.registered())}")
    parser.add_argument("--hparams", default="",
                        help='comma-separated overrides, e.g. "num_area_layers=1"')
    parser.add_argument("--seed", type=int, default=1)
    data = parser.add_argument_group("data (default: the embedded Tatoeba En-De)")
    data.add_argument("--train_source", help="source sentences, one per line (.txt/.gz)")
    data.add_argument("--train_target", help="target sentences aligned with --train_source")
    data.add_argument("--train_tsv", help="or: a TSV of source<TAB>target pairs")
    data.add_argument("--dev_source")
    data.add_argument("--dev_target")
    data.add_argument("--dev_tsv")
    data.add_argument("--test_source")
    data.add_argument("--test_target")
    data.add_argument("--test_tsv")
    data.add_argument("--vocab_type", choices=("subword", "char"), default="subword")
    data.add_argument("--vocab_size", type=int, default=4000)
    data.add_argument("--length_bucket_step", type=float, default=1.5,
                      help="t2t uses 1.1; coarser buckets mean fewer XLA compiles")
    train = parser.add_argument_group("training")
    train.add_argument("--train_steps", type=int, default=900)
    train.add_argument("--steps_per_checkpoint", type=int, default=100)
    train.add_argument("--keep_checkpoints", type=int, default=5)
    train.add_argument(
        "--jit", choices=("auto", "on", "off"), default="auto",
        help="jit_compile for fit; auto = Keras' choice: XLA on GPU/TPU, not on "
        "CPU, where it is slower for this model (benchmarks/translate.py)",
    )
    train.add_argument("--recorded", action="store_true",
                       help="train on the batches `record` wrote to DIR/recorded/ "
                       "(no TensorFlow needed, e.g. JAX on an accelerator machine)")
    train.add_argument("--no_eval", action="store_true",
                       help="train only; skip the test-set evaluation")
    train.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                       help="Keras fit verbosity: 1 = progress bar")
    dec = parser.add_argument_group("decoding")
    dec.add_argument("--beam_size", type=int, default=4)
    dec.add_argument("--alpha", type=float, default=0.6)
    dec.add_argument("--extra_length", type=int, default=20,
                     help="decode at most source length + this many tokens")
    dec.add_argument("--decode_batch_size", type=int, default=64)
    dec.add_argument("--weights", help="weights file to decode with "
                     "(default: averaged weights if present, else the last)")
    dec.add_argument("--input_file", help="decode: sentences to translate (default stdin)")
    dec.add_argument("--output_file", help="decode: where to write (default stdout)")
    dec.add_argument("--examples", type=int, default=5,
                     help="evaluate: translations to print")
    parser.add_argument("--last", type=int, default=5, help="average: checkpoints to average")
    return parser


def check_args(args):
    if args.steps_per_checkpoint < 1 or args.train_steps < 1:
        raise ValueError("--train_steps and --steps_per_checkpoint must be >= 1")
    if args.beam_size < 1:
        raise ValueError(f"--beam_size must be >= 1, got {args.beam_size}")
    for split in SPLITS:
        tsv = getattr(args, f"{split}_tsv")
        source = getattr(args, f"{split}_source")
        target = getattr(args, f"{split}_target")
        if tsv and (source or target):
            raise ValueError(f"Give either --{split}_tsv or --{split}_source/--{split}_target")
        if bool(source) != bool(target):
            raise ValueError(f"--{split}_source and --{split}_target go together")


# -------------------------------------------------------------------- data


def load_pairs(args, split):
    """Pairs of a split from the flags, or the embedded Tatoeba split."""
    tsv = getattr(args, f"{split}_tsv")
    source = getattr(args, f"{split}_source")
    if tsv:
        pairs = parallel_text.read_tsv_pairs(tsv)
    elif source:
        pairs = parallel_text.read_parallel_files(source, getattr(args, f"{split}_target"))
    elif any(getattr(args, f"{s}_{k}") for s in SPLITS for k in ("tsv", "source")):
        return None  # the user gave other splits: no silent Tatoeba mix-in
    else:
        pairs = tatoeba.load_tatoeba_en_de(split, clean=False)  # cleaned below, as files are
    pairs, report = parallel_text.filter_pairs(pairs, clean=True)
    print(f"[data] {split}: {report}")
    return pairs


def load_or_train_vocab(args, pairs):
    path = os.path.join(args.output_dir, "vocab")
    existing = glob.glob(path + ".*")
    if existing:
        return vocab_lib.load_vocab(existing[0])
    if pairs is None:
        raise ValueError(f"No vocabulary in {args.output_dir}: run `train` first.")
    texts = [s for s, _ in pairs] + [t for _, t in pairs]
    if args.vocab_type == "char":
        vocab = vocab_lib.CharVocab.build(texts)
        path += ".json"
    else:
        vocab = vocab_lib.SubwordVocab.train(texts, args.vocab_size, seed=args.seed)
        path += ".model"
    os.makedirs(args.output_dir, exist_ok=True)
    vocab.save(path)
    print(f"[vocab] {args.vocab_type}, {vocab.vocab_size} ids -> {path}")
    return vocab


# ------------------------------------------------------------------- model


def resolve_hparams(args, for_training):
    """The hparams of the run: saved ones if present, else from the flags."""
    path = os.path.join(args.output_dir, "hparams.json")
    if os.path.exists(path):
        saved = hparams_lib.HParams.load(path)
        if for_training and args.hparams:
            wanted = saved.parse(args.hparams)
            if wanted != saved:
                raise ValueError(
                    f"{args.output_dir} holds a run with other hparams ({path}); "
                    "use a new --output_dir to change them."
                )
        return saved
    if not for_training:
        raise FileNotFoundError(f"No trained run in {args.output_dir} (no hparams.json)")
    name = args.hparams_set
    if name is None:
        name = DEFAULT_LSTM_HPARAMS_SET if args.model == "lstm" else DEFAULT_HPARAMS_SET
    hparams = hparams_lib.get(name)
    if args.model and hparams.model_type != args.model:
        raise ValueError(
            f"--model {args.model} does not match --hparams_set {name}, a "
            f"{hparams.model_type} set."
        )
    if name == DEFAULT_HPARAMS_SET:
        hparams = hparams.parse(DEFAULT_SET_OVERRIDES)
    return hparams.parse(args.hparams)


def model_type(hparams):
    # Runs saved before `model_type` existed are Transformers.
    return getattr(hparams, "model_type", "transformer")


def build_model(hparams, vocab, seed=None):
    model = MODELS[model_type(hparams)].from_hparams(hparams, vocab.vocab_size, seed=seed)
    model((np.ones((1, 4), "int32"), np.zeros((1, 4), "int32")))  # build
    return model


def checkpoint_dir(args):
    return os.path.join(args.output_dir, "checkpoints")


def checkpoints(args):
    return checkpoints_lib.checkpoint_paths(checkpoint_dir(args))


def default_weights(args):
    if args.weights:
        return args.weights
    averaged = os.path.join(args.output_dir, "averaged.weights.h5")
    if os.path.exists(averaged):
        return averaged
    return checkpoints_lib.latest_checkpoint(checkpoint_dir(args))


def load_trained(args):
    hparams = resolve_hparams(args, for_training=False)
    vocab = load_or_train_vocab(args, None)
    model = build_model(hparams, vocab)
    weights = default_weights(args)
    model.load_weights(weights)
    print(f"[model] {args.output_dir}: weights {os.path.basename(weights)}")
    return model, vocab, hparams


# ------------------------------------------------------------------ train


class TrainingData(typing.NamedTuple):
    """What `training_data` gives `train` and `record`."""

    hparams: object
    vocab: object
    dataset: object  # tf.data training batches, repeated
    validation: object  # tf.data dev batches, or None without dev data
    validation_steps: object  # batches in one pass over `validation`, or None
    train_tokens: object  # batching.TokenizedPairs the batches are made of
    dev_tokens: object  # the same for `validation`, or None


def training_data(args):
    """The hparams, the vocabulary (trained on first use) and the `tf.data`
    training and dev batches of a run: each corpus is read and cleaned once
    (`load_pairs`) and tokenised once (`batching.tokenize_pairs`); the
    pipeline, its report of pairs dropped for length and `record` all read
    those ids."""
    hparams = resolve_hparams(args, for_training=True)
    train_pairs = load_pairs(args, "train")
    if train_pairs is None:
        raise ValueError("Give training data: --train_tsv or --train_source/--train_target")
    vocab = load_or_train_vocab(args, train_pairs)
    hparams.save(os.path.join(args.output_dir, "hparams.json"))
    print(f"[hparams] {args.hparams_set or 'default'}: {hparams}")

    options = dict(
        batch_tokens=hparams.batch_size,
        max_length=hparams.max_length,
        length_bucket_step=args.length_bucket_step,
    )
    train_tokens = batching.tokenize_pairs(train_pairs, vocab, vocab)
    dataset, report = batching.make_tokenized_dataset(
        train_tokens, shuffle=True, seed=args.seed, repeat=True, **options
    )
    print(f"[data] train batches: {report}")
    dev_pairs = load_pairs(args, "dev")
    dev_tokens, validation, validation_steps = None, None, None
    if dev_pairs:
        dev_tokens = batching.tokenize_pairs(dev_pairs, vocab, vocab)
        validation, dev_report = batching.make_tokenized_dataset(
            dev_tokens, shuffle=False, repeat=False, **options
        )
        # Counted once, so that Keras knows where an evaluation pass ends.
        validation_steps = sum(1 for _ in validation)
        print(f"[data] dev batches: {dev_report}; {validation_steps} batches")
    return TrainingData(hparams, vocab, dataset, validation, validation_steps, train_tokens,
                        dev_tokens)


def recording_paths(args):
    folder = os.path.join(args.output_dir, "recorded")
    return os.path.join(folder, "train.npz"), os.path.join(folder, "dev.npz")


def record(args):
    """Writes the batches `train` would read (its first `--train_steps`
    training batches and all dev batches) to DIR/recorded/, so that
    `train --recorded` replays them on a machine without TensorFlow."""
    data = training_data(args)
    train_path, dev_path = recording_paths(args)
    os.makedirs(os.path.dirname(train_path), exist_ok=True)
    start = time.time()
    count = recorded_lib.save_recording(
        train_path, data.train_tokens, data.dataset.take(args.train_steps).as_numpy_iterator()
    )
    print(f"[record] {count} training batches -> {train_path} ({time.time() - start:.0f} s)")
    if data.validation is not None:
        count = recorded_lib.save_recording(
            dev_path, data.dev_tokens, data.validation.as_numpy_iterator()
        )
        print(f"[record] {count} dev batches -> {dev_path}")
    return train_path


def recorded_data(args):
    """`training_data` from the files of `record`: no TensorFlow needed."""
    train_path, dev_path = recording_paths(args)
    if not os.path.exists(train_path):
        raise FileNotFoundError(
            f"No recorded batches in {train_path}: run `record` with the same flags first"
        )
    hparams = resolve_hparams(args, for_training=True)
    vocab = load_or_train_vocab(args, None)
    hparams.save(os.path.join(args.output_dir, "hparams.json"))  # this run's, not record's
    print(f"[hparams] {args.hparams_set or 'default'}: {hparams}")
    batches = recorded_lib.load_recording(train_path)
    if len(batches) < args.train_steps:
        raise ValueError(
            f"--train_steps={args.train_steps} but {train_path} holds {len(batches)} "
            "batches: record at least as many"
        )
    validation = recorded_lib.load_recording(dev_path) if os.path.exists(dev_path) else None
    print(f"[data] replaying {len(batches)} recorded training batches from {train_path}")
    return hparams, vocab, batches, validation


def train(args):
    keras.utils.set_random_seed(args.seed)
    jit = {"auto": "auto", "on": True, "off": False}[args.jit]
    if jit is False and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # Keras turns XLA off when op determinism is on; with XLA on, the
        # seeds (initialisation, dropout, shuffling) make CPU runs repeat.
        tf.config.experimental.enable_op_determinism()
    if args.recorded:
        hparams, vocab, batches, validation = recorded_data(args)
        validation_steps = None if validation is None else len(validation)
    else:
        data = training_data(args)
        hparams, vocab, dataset = data.hparams, data.vocab, data.dataset
        validation, validation_steps = data.validation, data.validation_steps

    model = build_model(hparams, vocab, seed=args.seed)
    schedule = WarmupRsqrtDecay(
        hparams.learning_rate_constant,
        hparams.learning_rate_warmup_steps,
        hparams.hidden_size,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(
            schedule,
            beta_1=hparams.optimizer_adam_beta1,
            beta_2=hparams.optimizer_adam_beta2,
            epsilon=hparams.optimizer_adam_epsilon,
        ),
        loss=PaddedCrossEntropy(hparams.label_smoothing),
        metrics=[PaddedAccuracy()],
        jit_compile=jit,
    )
    print(f"[model] {model.count_params():,} parameters")
    epochs = -(-args.train_steps // args.steps_per_checkpoint)
    # A killed run resumes from its newest checkpoint (weights, optimizer
    # state and dropout seeds, written atomically); a finished one trains no further unless
    # --train_steps grew. Keep --steps_per_checkpoint when resuming: the
    # checkpoint names count epochs of that many steps.
    initial_epoch = restore_latest(model, checkpoint_dir(args))
    if initial_epoch:
        print(f"[train] resuming after epoch {initial_epoch} "
              f"(step {int(keras.ops.convert_to_numpy(model.optimizer.iterations))})")
    # The batches of the epochs done are passed over, so that a resumed run
    # reads the data in the order of an uninterrupted one.
    done = initial_epoch * args.steps_per_checkpoint
    if args.recorded and keras.backend.backend() == "tensorflow":
        dataset = batches.to_tf_dataset(start=done)
        validation = None if validation is None else validation.to_tf_dataset()
    elif args.recorded:
        dataset = batches.iterate(start=done)
    else:
        dataset = dataset.skip(done)
    callbacks = [
        EpochCheckpoints(checkpoint_dir(args), keep=args.keep_checkpoints),
        # The metrics of every epoch, also where TensorBoard is not available.
        keras.callbacks.CSVLogger(os.path.join(args.output_dir, "history.csv"), append=True),
        keras.callbacks.TerminateOnNaN(),
    ]
    try:
        import tensorflow  # noqa: F401  (Keras' TensorBoard callback writes with it)
    except ImportError:
        print("[train] no TensorFlow: no TensorBoard logs (history.csv has the metrics)")
    else:
        callbacks.append(keras.callbacks.TensorBoard(os.path.join(args.output_dir, "logs")))
    start = time.time()
    history = model.fit(
        dataset,
        steps_per_epoch=args.steps_per_checkpoint,
        epochs=epochs,
        initial_epoch=initial_epoch,
        validation_data=validation,
        validation_steps=validation_steps,
        shuffle=False,  # the tf.data pipeline shuffles (seeded) itself
        callbacks=callbacks,
        verbose=args.verbose,
    )
    steps = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    print(f"[train] {steps} steps in {time.time() - start:.0f} s")
    with open(os.path.join(args.output_dir, "train_summary.json"), "w") as f:
        json.dump({"steps": steps, "history": history.history}, f, indent=2)
    if not args.no_eval:
        # The model in memory holds the weights of the checkpoint just
        # written (or restored): evaluate it as it is.
        print(f"[model] the trained model in memory "
              f"(= {os.path.basename(checkpoints(args)[-1])})")
        evaluate(args, trained=(model, vocab, hparams))
    return model


# --------------------------------------------------------------- decoding


def translate(args, trained, sentences):
    """`translate_sentences` with the decoding flags; reports truncated sources."""
    model, vocab, hparams = trained
    result = translate_sentences(
        model, vocab, sentences,
        max_length=hparams.max_length,
        beam_size=args.beam_size,
        alpha=args.alpha,
        extra_length=args.extra_length,
        batch_size=args.decode_batch_size,
    )
    if result.truncated:
        # On stderr: `decode` may be writing the translations to stdout.
        print(f"[decode] {result.truncated} of {len(sentences)} sources longer than "
              f"{hparams.max_length - 1} tokens were truncated", file=sys.stderr)
    return result.translations


def evaluate(args, trained=None):
    """Scores the test set; `trained` is `(model, vocab, hparams)` (default:
    the run in `--output_dir`, loaded by `load_trained`)."""
    trained = trained or load_trained(args)
    pairs = load_pairs(args, "test")
    if not pairs:
        raise ValueError("Give test data: --test_tsv or --test_source/--test_target")
    sources, references = group_references(pairs)
    start = time.time()
    hypotheses = translate(args, trained, sources)
    seconds = time.time() - start
    bleu = corpus_bleu(hypotheses, references)
    chrf = corpus_chrf(hypotheses, references)
    counts = sorted({len(r) for r in references})
    print(f"[eval] {len(sources)} test sources ({len(pairs)} pairs, "
          f"{counts[0]}-{counts[-1]} references each), beam {args.beam_size}, "
          f"alpha {args.alpha}: {seconds:.0f} s")
    print(bleu)
    print(chrf)
    path = os.path.join(args.output_dir, "test.hyp.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(hypotheses) + "\n")
    with open(os.path.join(args.output_dir, "test_scores.json"), "w") as f:
        json.dump({"bleu": bleu.score, "bleu_signature": bleu.signature,
                   "chrf": chrf.score, "chrf_signature": chrf.signature}, f, indent=2)
    for source, refs, hyp in list(zip(sources, references, hypotheses))[: args.examples]:
        print(f"  source:    {source}\n  reference: {refs[0]}\n  output:    {hyp}")
    return bleu, chrf


def decode(args):
    trained = load_trained(args)
    if args.input_file:
        lines = parallel_text.read_lines(args.input_file)
    else:
        lines = [line.rstrip("\n") for line in sys.stdin]
    outputs = translate(args, trained, lines)
    text = "\n".join(outputs) + "\n"
    if args.output_file:
        with open(args.output_file, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"[decode] {len(lines)} sentences -> {args.output_file}")
    else:
        sys.stdout.write(text)


def average(args):
    """Averages the weights of the last `--last` checkpoints."""
    found = checkpoints(args)[-args.last :]
    if not found:
        raise FileNotFoundError(f"No checkpoints in {checkpoint_dir(args)}")
    hparams = resolve_hparams(args, for_training=False)
    vocab = load_or_train_vocab(args, None)
    model = build_model(hparams, vocab)
    checkpoints_lib.average_checkpoints(model, found)
    path = os.path.join(args.output_dir, "averaged.weights.h5")
    model.save_weights(path)
    print(f"[average] {len(found)} checkpoints -> {path}: "
          + ", ".join(os.path.basename(p) for p in found))
    return path


def export(args):
    """A SavedModel mapping a batch of raw source strings to translations."""
    if keras.backend.backend() != "tensorflow":
        raise ValueError("export needs the TensorFlow backend (KERAS_BACKEND=tensorflow)")
    import tensorflow as tf

    model, vocab, hparams = load_trained(args)
    translator = string_translator(
        model, vocab, max_length=hparams.max_length, beam_size=args.beam_size, alpha=args.alpha
    )
    path = os.path.join(args.output_dir, "export")
    tf.saved_model.save(translator, path)
    print(f"[export] SavedModel -> {path} (call it on a batch of strings)")
    return path


def main(argv=None):
    args = build_parser().parse_args(argv)
    check_args(args)
    return {
        "train": train,
        "evaluate": evaluate,
        "decode": decode,
        "average": average,
        "export": export,
        "record": record,
    }[args.command](args)


if __name__ == "__main__":
    main()
