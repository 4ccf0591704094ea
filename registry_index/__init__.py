"""Pure registry logic: names, filenames, metadata, validation, simple-index rendering."""
