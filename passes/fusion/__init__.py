"""Op-flag fusion, in one place: the pattern table, its matcher and its builders.

    matcher.py      what a pattern is (Step, FusionPattern) and how it matches
                    (Match, match_at, find_matches over the CSR graph of passes/dataflow.py)
    constraints.py  what an op class means inside a fused op (EPILOGUE_FORMS,
                    LOSS_GRADS, ...) and the step constraints that ask it
    head_layout.py  the head layout around attention (split, reshape, transpose) and
                    the constraints of the packed-qkv fold
    patterns.py     the rules: each FusionPattern row with its builder function,
                    FUSION_PATTERNS and PATTERN_GROUPS

The pass aicfc-fuse (passes/aicfc_fuse.py) walks the blocks and applies the
matches; the operator report (passes/analysis/) lists the same matches as
fusion candidates.
"""
