"""What bench/zc_dynamic.py and bench/torch_dynamic.py both take: the GPT's shape, the lengths in
the order they are called, the modes and the per-process timeout, checked the same way."""

DEFAULT_LENGTHS = (16, 32, 24, 40, 64, 100, 77, 120)
MODES = ("auto", "marked", "static", "all")
DEFAULT_MODES = ("auto", "marked", "static")  # "all": every input dim dynamic from the start


def add_model_args(ap, device, layers, d_model, heads):
    """Adds the shared arguments to `ap` with these defaults (each script its own model)."""
    ap.add_argument("--device", default=device, choices=("cpu", "cuda"))
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--d-model", type=int, default=d_model)
    ap.add_argument("--heads", type=int, default=heads)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steady", type=int, default=20)
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES))
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("lengths", type=int, nargs="*")


def lengths_and_modes(ap, args):
    """The lengths (DEFAULT_LENGTHS when none are given) and modes; ap.error() for bad ones."""
    lengths = args.lengths or list(DEFAULT_LENGTHS)
    if min(lengths) < 1:
        ap.error("lengths must be 1 or more")
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in MODES:
            ap.error(f"unknown mode '{mode}'; expected {', '.join(MODES[:-1])} or {MODES[-1]}")
    return lengths, modes
