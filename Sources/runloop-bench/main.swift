print("runloop-bench")
