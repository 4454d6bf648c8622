"""The training precision of a run: float32 or Keras' `mixed_bfloat16`.

`mixed_bfloat16` keeps the weights in float32 and computes in bfloat16
(softmax, sums and geometry stay float32 inside the layers). Whether it
pays depends on the machine: `auto` takes it only where it was measured
faster at equal quality (`docs/performance.md`), else float32.
"""

CHOICES = ("auto", "float32", "mixed_bfloat16")


def cpu_flags(path="/proc/cpuinfo"):
    """The CPU's feature flags (a set; empty where the file is unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def bfloat16_is_faster(flags=None):
    """Whether `mixed_bfloat16` trains faster than float32 on this machine:
    on CPUs with AMX tiles for bfloat16 (`amx_bf16`) only. AVX512-BF16
    alone measured slower than float32 (`docs/performance.md`)."""
    return "amx_bf16" in (cpu_flags() if flags is None else flags)


def resolve(choice, flags=None):
    """The dtype policy name of a `--precision` choice (`auto` decided by
    `bfloat16_is_faster`)."""
    if choice not in CHOICES:
        raise ValueError(f"precision must be one of {', '.join(CHOICES)}; got {choice!r}")
    if choice == "auto":
        return "mixed_bfloat16" if bfloat16_is_faster(flags) else "float32"
    return choice


def use(policy):
    """Makes `policy` the dtype policy of every layer built from now on."""
    import keras  # here: the recipes' command line reads CHOICES before Keras loads

    keras.config.set_dtype_policy(policy)
