"""One module per algorithm; each holds its allocation-free kernel and the public function."""
