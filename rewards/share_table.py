"""Print the reward's weight ``s`` per op family under every shipped profile, and what it pays.

``python -m kbenv.rewards.share_table`` writes two Markdown tables (the README carries their output):

1. per problem set and family, the default profile (:func:`kbenv.rewards.amdahl.default_profile_name`), ``s``
   under it and the ``amdahl`` reward of a verified kernel at sigma = 0.5, 1, 2 and 4 (and the ceiling
   ``1/(1 - s)``);
2. ``s`` per family under each shipped profile (``-`` where a paper row states nothing: 0 by definition).
"""

from __future__ import annotations

import argparse

from kbenv.rewards.amdahl import default_profile_name, family_share_info, list_profiles, load_profile, share_for
from kbenv.rewards.classify import FAMILIES
from kbenv.rewards.reward import amdahl

SIGMAS = (0.5, 1.0, 2.0, 4.0)
SET_FAMILIES = {
    "kernelbench": ("matmul", "conv", "attention", "elementwise", "softmax", "normalization", "pooling",
                    "reduction", "scan", "loss"),
    "dlrm": ("embedding", "gather_scatter", "normalization", "interaction", "topk"),
}


def default_rows() -> list[list[str]]:
    rows = []
    for pset, fams in SET_FAMILIES.items():
        for fam in fams:
            s, status, prof = share_for(None, fam, pset)
            rewards = [amdahl(True, sig, s).value for sig in SIGMAS]
            ceiling = "inf" if s >= 1 else f"{1 / (1 - s):.3f}"
            rows.append([pset, fam, prof, f"{s:.4f}", *(f"{r:.3f}" for r in rewards), ceiling])
    return rows


def profile_rows(profiles: list[str]) -> list[list[str]]:
    loaded = [load_profile(p) for p in profiles]
    rows = []
    for fam in FAMILIES:
        cells = []
        for prof in loaded:
            info = family_share_info(prof, fam)
            cells.append("-" if info.status == "absent" else (f"{info.share:.4f}" + ("*" if info.status == "group" else "")))
        rows.append([fam, *cells])
    return rows


def _md(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    print(_md(["set", "family", "default profile", "s", *(f"R(σ={s:g})" for s in SIGMAS), "ceiling 1/(1-s)"],
              default_rows()))
    print()
    profiles = list_profiles()
    print(_md(["family", *profiles], profile_rows(profiles)))
    print()
    print("R = amdahl reward of a verified kernel, 1 / ((1 - s) + s / σ). `-`: the paper row states no share for "
          "the family (s = 0 by definition); `*`: one figure for a group of families (an upper bound).")
    _ = default_profile_name  # the rule that picks the default profile is documented there


if __name__ == "__main__":
    main()
