"""Training support: what the recipes use around `model.fit`.

Modules:
    hparams: named hyper-parameter sets with command-line overrides
        (tensor2tensor style), saved next to the checkpoints.
    callbacks: checkpoints that survive a kill at any moment, and resuming.
    checkpoints: finding and averaging the weight checkpoints of a run.
    schedules: learning-rate schedules (`WarmupRsqrtDecay`, ...).
    losses: losses for sequence models with padding.
    distribution: data-parallel training on Keras' own engines.
    feeding: resumable epochs of indexed data, fed to data-parallel `fit`.
    run_folder: a run's files (settings, averaged weights), written whole.
    curves: learning curves drawn from the history CSVs (matplotlib).
    precision: a run's float32 or mixed bfloat16 training, `auto` by
        machine.
    self_critical: self-critical sequence training (SCST) of captioners.
    dictionaries: fitting the global dictionaries of a CATT model (K-means)
        before training.

Nothing here is imported by `keras_structattn.ops`, `.layers` or `.decoding`.
"""
