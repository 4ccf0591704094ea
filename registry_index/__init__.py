"""Pure registry logic: names, filenames, metadata, validation, simple-index rendering.

No web framework and no I/O beyond reading the archive it is given, so the hub, the CLI's
local pre-push checks and the tests all share exactly the same rules.
"""
