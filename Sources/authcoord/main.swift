print("authcoord")
