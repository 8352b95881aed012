print("fleet-demo: not yet")
