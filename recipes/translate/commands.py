"""The commands of the translation recipe (flags: `recipes.translate`).

Each command is `command(args)`; `run(args)` picks it. Status goes to
stderr, results to stdout (`_cli.emit`). Under `train --distribute
data_parallel` (docs/distributed.md) every batch gets all-padding rows up
to a multiple of the replicas (`keras_structattn.tasks.translation.replicas`:
Keras' epoch averages of the loss, weighted by rows, differ a little).
"""

import collections
import os
import sys
import time

import keras
import numpy as np

from keras_structattn import metrics
from keras_structattn.data import vocab as vocab_lib
from keras_structattn.metrics.text import group_references
from keras_structattn.tasks.translation import batching
from keras_structattn.tasks.translation import parallel_text
from keras_structattn.tasks.translation import recorded as recorded_lib
from keras_structattn.tasks.translation import replicas as replicas_lib
from keras_structattn.tasks.translation import tatoeba
from keras_structattn.tasks.translation import translate as translate_lib
from keras_structattn.training import checkpoints as checkpoints_lib
from keras_structattn.training.distribution import Replicas
from keras_structattn.training.distribution import restarting
from keras_structattn.training.run_folder import write_atomically
from keras_structattn.training.run_folder import write_json
from models.translation.lstm_seq2seq import LSTMSeq2Seq
from models.translation.transformer import Transformer
from recipes import _cli
from recipes import _engine
from recipes import _replicas
from recipes import _run
from recipes import _seq2seq
from recipes.translate import DEFAULT_HPARAMS_SET
from recipes.translate import DEFAULT_LSTM_HPARAMS_SET
from recipes.translate import RUN_DEFAULTS
from recipes.translate import SPLITS
from recipes.translate import TRAINING_COMMANDS

MODELS = {"transformer": Transformer, "lstm": LSTMSeq2Seq}
# Applied to the default set only: the t2t defaults are for WMT-sized runs
# (8000 warm-up steps, batches of 4096 tokens, sentences up to 256 tokens).
DEFAULT_SET_OVERRIDES = "learning_rate_warmup_steps=400,batch_size=2048,max_length=48"


def run(args):
    """Runs `args.command` (the function of that name); returns what it returns."""
    return globals()[args.command](args)


def load_pairs(args, split):
    """Pairs of a split from the flags, or the embedded Tatoeba split."""
    tsv, source, target = (getattr(args, f"{split}_{k}") for k in ("tsv", "source", "target"))
    if not (tsv or source) and any(getattr(args, f"{s}_{k}") for s in SPLITS
                                   for k in ("tsv", "source")):
        return None  # the user gave other splits: no silent Tatoeba mix-in
    pairs, report = tatoeba.corpus_pairs(split, tsv=tsv, source=source, target=target)
    print(f"[data] {split}: {report}")
    if not pairs:
        named = tsv or (source and f"{source} and {target}") or "the embedded Tatoeba data"
        raise ValueError(f"{named}: no {split} sentence pairs ({report})")
    return pairs


def train_vocab(settings, pairs):
    """A vocabulary of the training pairs (saved when the run is committed)."""
    texts = [s for s, _ in pairs] + [t for _, t in pairs]
    source = "the training pairs"
    if settings["vocab_type"] == "char":
        return vocab_lib.CharVocab.build(texts, source=source)
    return vocab_lib.SubwordVocab.train(texts, settings["vocab_size"], seed=settings["seed"],
                                        source=source)


def vocab_file(settings):
    return "vocab.json" if settings["vocab_type"] == "char" else "vocab.model"


def load_vocab(run, settings):
    return vocab_lib.load_vocab(run.file(vocab_file(settings)))


def check_set(hparams, settings):
    """A usage error unless a new run's set is a set of its --model."""
    if settings["model"] and hparams.model_type != settings["model"]:
        raise _cli.UsageError(
            f"--model {settings['model']} does not match --hparams_set "
            f"{settings['hparams_set']}, a {hparams.model_type} set")


def model_type(hparams):
    # Runs saved before `model_type` existed are Transformers.
    return getattr(hparams, "model_type", "transformer")


def build_model(hparams, vocab, seed=None):
    model = MODELS[model_type(hparams)].from_hparams(hparams, vocab.vocab_size, seed=seed)
    model((np.ones((1, 4), "int32"), np.zeros((1, 4), "int32")))  # build
    return model


def checkpoints(args, readable_only=False):
    folder = os.path.join(args.output_dir, "checkpoints")
    return checkpoints_lib.checkpoint_paths(folder, readable_only=readable_only)


def resolve_run(args):
    """`(run, settings, hparams)` (`_seq2seq.resolve_run`), a new run's hparams made."""
    default_set = DEFAULT_LSTM_HPARAMS_SET if args.model == "lstm" else DEFAULT_HPARAMS_SET
    run, settings, hparams = _seq2seq.resolve_run(
        args, dict(model=args.model, hparams_set=args.hparams_set,
                   vocab_type=args.vocab_type, vocab_size=args.vocab_size),
        dict(RUN_DEFAULTS, hparams_set=default_set, model=None), check_set, TRAINING_COMMANDS)
    if hparams is None:
        hparams = _seq2seq.new_hparams(args, settings, DEFAULT_HPARAMS_SET,
                                       DEFAULT_SET_OVERRIDES)
    settings["model"] = model_type(hparams)
    return run, settings, hparams


def prepare_run(args, resolved, train_pairs, write):
    """`(vocab, model)` of the run `resolved`; a new run's vocabulary is trained on
    `train_pairs` (None: `train --recorded`, which needs a recorded run)."""
    run, settings, hparams = resolved
    if run.holds_run:
        vocab = load_vocab(run, settings)
        print(f"[run] resuming {args.output_dir}: {settings['hparams_set']}")
    elif train_pairs is None:
        raise _cli.UsageError(f"no run in {args.output_dir}: run `record` first")
    else:
        vocab = train_vocab(settings, train_pairs)
    model = _seq2seq.build_run(
        args, run, settings, hparams, vocab, vocab_file(settings),
        lambda seed: build_model(hparams, vocab, seed=seed),
        f"{settings['vocab_type']} vocabulary of {vocab.vocab_size} ids", write)
    return vocab, model


def load_trained(args, weights=True):
    """`(model, vocab, hparams)` of the run, with its chosen weights if `weights`."""
    run, settings, hparams = resolve_run(args)
    vocab = load_vocab(run, settings)
    model = build_model(hparams, vocab)
    if weights:
        _seq2seq.load_weights(model, args, run)
    return model, vocab, hparams


# What `training_data` and `recorded_data` give: `batches(done)` is this
# process's training batches after `done` steps, `validation` the dev batches
# (tf.data or a `Recording`) or None, `tokens` the train and dev
# `TokenizedPairs` (None when recorded).
TrainingData = collections.namedtuple(
    "TrainingData", "hparams vocab model batches validation validation_steps tokens")


def training_data(args, replicas):
    """The run and its `tf.data` batches (`batching.TrainingBatches`: each
    corpus read, cleaned and tokenised once)."""
    resolved = resolve_run(args)
    train_pairs = load_pairs(args, "train")
    if train_pairs is None:
        raise _cli.UsageError("give training data: --train_tsv or --train_source/--train_target")
    dev_pairs = load_pairs(args, "dev")
    vocab, model = prepare_run(args, resolved, train_pairs, replicas.is_chief)
    hparams = resolved[2]
    data = batching.TrainingBatches(
        train_pairs, dev_pairs, vocab, seed=resolved[1]["seed"], batch_tokens=hparams.batch_size,
        max_length=hparams.max_length, length_bucket_step=args.length_bucket_step)
    print(f"[data] train batches: {data.train_report}")
    if data.validation is not None:
        print(f"[data] dev batches: {data.validation_report}; {data.validation_steps} batches")

    def batches(done):
        def make():
            return replicas_lib.replica_batches(data.train(done), replicas)

        if keras.backend.backend() == "tensorflow" and replicas.strategy is None:
            return make()
        # Keras' JAX `fit`, and TensorFlow's under a strategy, peek at a
        # batch with an iterator of their own, then train on another: the
        # batches `record` writes, on one device, only if each iterator
        # starts the stream afresh.
        return restarting(make)

    return TrainingData(hparams, vocab, model, batches, data.validation, data.validation_steps,
                        (data.train_tokens, data.dev_tokens))


def recording_paths(args):
    folder = os.path.join(args.output_dir, "recorded")
    return os.path.join(folder, "train.npz"), os.path.join(folder, "dev.npz")


def record(args):
    """Writes `train`'s first --train_steps batches and the dev batches to
    DIR/recorded/, for `train --recorded` (no TensorFlow needed)."""
    data = training_data(args, Replicas())
    train_path, dev_path = recording_paths(args)
    os.makedirs(os.path.dirname(train_path), exist_ok=True)
    start = time.time()
    batches = data.batches(0).take(args.train_steps).as_numpy_iterator()
    count = recorded_lib.save_recording(train_path, data.tokens[0], batches)
    print(f"[record] {count} training batches -> {train_path} ({time.time() - start:.0f} s)")
    if data.validation is not None:
        count = recorded_lib.save_recording(dev_path, data.tokens[1],
                                            data.validation.as_numpy_iterator())
        print(f"[record] {count} dev batches -> {dev_path}")
    return train_path


def recorded_data(args, replicas):
    """`training_data` from the files of `record`: no TensorFlow needed."""
    train_path, dev_path = recording_paths(args)
    if not os.path.exists(train_path):
        raise _cli.UsageError(
            f"no recorded batches in {train_path}: run `record` with the same flags first")
    resolved = resolve_run(args)
    vocab, model = prepare_run(args, resolved, None, replicas.is_chief)
    recording = recorded_lib.load_recording(train_path)
    if len(recording) < args.train_steps:
        raise _cli.UsageError(f"--train_steps={args.train_steps} but {train_path} holds "
                              f"{len(recording)} batches: record at least as many")
    validation = recorded_lib.load_recording(dev_path) if os.path.exists(dev_path) else None
    print(f"[data] replaying {len(recording)} recorded training batches from {train_path}")
    return TrainingData(resolved[2], vocab, model,
                        lambda done: replicas_lib.replica_recording(recording, replicas, done),
                        validation, None if validation is None else len(validation), None)


def train(args):
    """Trains (or resumes) the run to `--train_steps` steps, then evaluates."""
    replicas, jit = _seq2seq.replicas_and_jit(args)
    with replicas.scope():
        # A resumed run skips the batches of the steps done (`batches(done)`).
        data = (recorded_data if args.recorded else training_data)(args, replicas)
        _seq2seq.compile_model(data.model, data.hparams, args, jit)
        scores = _engine.ScoresHook(
            ("bleu",), lambda m: {"bleu": dev_bleu(args, m, data.vocab, data.hparams)})
        _engine.check_task_score(args, replicas, scores)
        _engine.fit(data.model, args, data.batches, per_epoch=args.steps_per_checkpoint,
                    total_steps=args.train_steps,
                    validation=replicas_lib.replica_validation(data.validation, replicas),
                    validation_steps=data.validation_steps, replicas=replicas, scores=scores)
    model, vocab, hparams = data.model, data.vocab, data.hparams
    steps = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    if not replicas.is_chief:
        print(f"[train] {steps} steps; process {replicas.process_id} is done (process 0 "
              "writes the run's files)")
        return model
    run = _run.RunFolder(args.output_dir)
    write_json(run.file("train_summary.json"),
               {"steps": steps, "history": _seq2seq.history_of(run)})
    if _replicas.evaluates_after_training(args, replicas):
        # The model in memory holds the weights of the checkpoint just
        # written (or restored), or the best one: evaluate it as it is.
        best = _engine.Phase().best_weights(args.output_dir) if args.early_stopping else None
        print(f"[model] the trained model in memory "
              f"(= {os.path.basename(best or checkpoints(args)[-1])})")
        evaluate(args, trained=(model, vocab, hparams))
    return model


def dev_bleu(args, model, vocab, hparams):
    """BLEU of greedy translations of the dev sources (for `--early_stopping bleu`)."""
    pairs = load_pairs(args, "dev")
    if not pairs:
        raise _cli.UsageError("--early_stopping bleu needs dev data: --dev_tsv or "
                              "--dev_source/--dev_target")
    sources, references = group_references(pairs)
    hypotheses = translate(args, (model, vocab, hparams), sources, greedy=True)
    return metrics.corpus_bleu(hypotheses, references).score


def translate(args, trained, sentences, greedy=False):
    """Translations with the decoding flags (`greedy`: beam 1, quiet, for `dev_bleu`)."""
    model, vocab, hparams = trained
    max_input_length = (not greedy and args.max_input_length) or hparams.max_length
    result = translate_lib.translate_sentences(
        model, vocab, sentences, max_length=hparams.max_length,
        max_input_length=max_input_length, beam_size=1 if greedy else args.beam_size,
        alpha=args.alpha, extra_length=args.extra_length, batch_size=args.decode_batch_size)
    if result.truncated and not greedy:
        print(f"warning: {result.truncated} of {len(sentences)} sources were longer than "
              f"{max_input_length - 1} tokens and were cut (--max_input_length raises "
              "the limit)")
    return result.translations


def evaluate(args, trained=None):
    """BLEU and chrF of the test set's translations by `trained` (default: the run's)."""
    pairs = load_pairs(args, "test")
    if not pairs:
        raise _cli.UsageError("give test data: --test_tsv or --test_source/--test_target")
    trained = trained or load_trained(args)
    sources, references = group_references(pairs)
    start = time.time()
    hypotheses = translate(args, trained, sources)
    seconds = time.time() - start
    bleu = metrics.corpus_bleu(hypotheses, references)
    chrf = metrics.corpus_chrf(hypotheses, references)
    counts = sorted({len(r) for r in references})
    print(f"[eval] {len(sources)} test sources ({len(pairs)} pairs, "
          f"{counts[0]}-{counts[-1]} references each), beam {args.beam_size}, "
          f"alpha {args.alpha}: {seconds:.0f} s")
    for source, refs, hyp in list(zip(sources, references, hypotheses))[: args.examples]:
        print(f"  source:    {source}\n  reference: {refs[0]}\n  output:    {hyp}")
    write_atomically(os.path.join(args.output_dir, "test.hyp.txt"),
                     "".join(f"{h}\n" for h in hypotheses))
    write_json(os.path.join(args.output_dir, "test_scores.json"),
               {"bleu": bleu.score, "bleu_signature": bleu.signature,
                "chrf": chrf.score, "chrf_signature": chrf.signature})
    _cli.emit(bleu)
    _cli.emit(chrf)
    return bleu, chrf


def decode(args):
    """Translates `--input_file` (or stdin), a line for a line (`_seq2seq.deliver`)."""
    if args.input_file:
        lines = parallel_text.read_lines(args.input_file)
    else:
        lines = [line.rstrip("\n") for line in sys.stdin]
    outputs = translate(args, load_trained(args), lines)
    _seq2seq.deliver(args, outputs, "sentences")
    return outputs


def average(args):
    """Averages the weights of the last `--last` readable checkpoints."""
    found = checkpoints(args, readable_only=True)[-args.last:]
    if not found:
        folder = os.path.join(args.output_dir, "checkpoints")
        raise FileNotFoundError(f"No readable checkpoints in {folder}")
    model = load_trained(args, weights=False)[0]
    checkpoints_lib.average_checkpoints(model, found)
    run = _run.RunFolder(args.output_dir)
    path = run.file("averaged.weights.h5")
    write_atomically(path, model.save_weights)
    run.save_average_list(found)  # after the weights: never a list newer than them
    print(f"[average] {len(found)} checkpoints -> {path}: "
          + ", ".join(os.path.basename(p) for p in found))
    return path


def export(args):
    """A SavedModel whose `serving_default` translates raw source strings."""
    if keras.backend.backend() != "tensorflow":
        raise _cli.UsageError("export needs the TensorFlow backend (KERAS_BACKEND=tensorflow)")
    model, vocab, hparams = load_trained(args)
    path = translate_lib.save_string_translator(
        os.path.join(args.output_dir, "export"), model, vocab,
        max_length=hparams.max_length, beam_size=args.beam_size, alpha=args.alpha)
    print(f"[export] SavedModel -> {path}: load it after `import tensorflow_text` "
          "(README, Exporting)")
    return path
