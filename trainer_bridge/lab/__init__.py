"""The Lab's compute: the torch engine `prime hub serve --lab` gives the hub (docs/lab.md)."""
