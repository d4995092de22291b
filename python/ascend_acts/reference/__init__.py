"""NumPy reference implementations (float64-capable): the CPU default backend and the test oracle."""
