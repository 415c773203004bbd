"""The review vault: a Markdown (Obsidian-optional) view of an agent's memory and an inbox
of review proposals, driven by ``memoryd vault ...`` over the ReviewService.

The daemon stays the only source of truth: the vault holds rendered notes (dashboards,
records, review bundles, conflicts, duplicate candidates, doctor) under one review root
and a sidecar state file per bundle with the approvals. Nothing in a note is ever read
back as an instruction: approval is an explicit command, and ``review apply`` sends the
items recorded in the state file, never what a note says.

    paths.py     the review root: every write resolved and refused if it leaves the root
    blocks.py    managed blocks inside notes; text outside them is never touched
    settings.py  [vault] settings: TOML file, MEMORYD_VAULT__* variables, flags
    render.py    the notes (Markdown with YAML front matter)
    state.py     bundles' sidecar state (prepared items, approvals, results)
    cli.py       the verbs
"""
