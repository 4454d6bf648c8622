"""The area demo's contrast over seeds: test accuracy per epoch, regular vs area.

Trains `keras_structattn.tasks.run_of_three.build_model` (the recipe's data, optimizer and
batch size) with regular attention (`max_area_width=1`) and area attention
(`max_area_width=3`) for each seed, evaluates both on the test set after
every epoch, and prints per epoch the mean and range over the seeds.

Usage:
    python -m benchmarks.area_demo_seeds [--seeds 0,1,2,3,4] [--epochs 8] [--positions]
"""

import argparse
import datetime
import os
import platform
import sys

import numpy as np


def accuracies(width, seed, args, data):
    import keras

    from keras_structattn.tasks.run_of_three import build_model

    (x_train, y_train), (x_test, y_test) = data
    keras.utils.set_random_seed(seed)
    model = build_model(width, seed=seed, positions=args.positions)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.BinaryAccuracy(threshold=0.0, name="accuracy")],
        jit_compile=True,
    )
    found = []
    for epoch in range(args.epochs):
        model.fit(x_train, y_train, batch_size=64, epochs=epoch + 1, initial_epoch=epoch,
                  validation_split=0.1, verbose=0)
        found.append(model.evaluate(x_test, y_test, verbose=0, batch_size=256)[1])
    keras.backend.clear_session()
    return found


def main():
    from keras_structattn.tasks.run_of_three import make_dataset

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--positions", action="store_true",
                        help="learned positional embeddings (the recipe's first version)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    import keras

    print(f"# {datetime.date.today()} {platform.machine()} {os.cpu_count()} cores, "
          f"keras {keras.__version__} ({keras.backend.backend()}), XLA on")
    print(f"# command: python -m benchmarks.area_demo_seeds {' '.join(sys.argv[1:])}")
    print(f"# 8000 train / 2000 test sequences; positions: {args.positions}")
    table = {}
    for seed in seeds:
        data = (make_dataset(8000, seed=seed), make_dataset(2000, seed=seed + 1))
        for width in (1, 3):
            table[width, seed] = accuracies(width, seed, args, data)
            print(f"# seed {seed} width {width}: "
                  + " ".join(f"{a:.3f}" for a in table[width, seed]), flush=True)
    print("epoch | regular mean (min-max) | area mean (min-max)")
    for epoch in range(args.epochs):
        cells = []
        for width in (1, 3):
            values = np.array([table[width, seed][epoch] for seed in seeds])
            cells.append(f"{values.mean():.3f} ({values.min():.3f}-{values.max():.3f})")
        print(f"{epoch + 1:5d} | {cells[0]} | {cells[1]}")


if __name__ == "__main__":
    main()
