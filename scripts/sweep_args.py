"""The sweep options as flashlab bench spells them, for the scripts that hand a sweep to it
(compare_torch.py, precision_fa2.py): comma lists, and --causal as yes, no, or a list of them."""
import argparse


def csv_ints(s):
    return [int(x) for x in s.split(",") if x]


def csv_strs(s):
    return [x for x in s.split(",") if x]


def causal_list(s):
    """--causal as flashlab reads it: yes, no, or a list of them (no,yes); both is no,yes."""
    masks = []
    for item in s.split(","):
        if item not in ("yes", "no", "both"):
            raise argparse.ArgumentTypeError(
                f"unknown --causal '{item}' (known: yes, no, or a list such as no,yes)")
        for m in ([False, True] if item == "both" else [item == "yes"]):
            if m not in masks:
                masks.append(m)
    return masks
