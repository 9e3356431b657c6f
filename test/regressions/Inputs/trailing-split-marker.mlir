func.func @only() {
  func.return
}

// -----
