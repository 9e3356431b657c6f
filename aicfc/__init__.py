"""aicfc: an MLIR-style AI compiler on xDSL."""
