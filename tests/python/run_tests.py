"""Runs one test module with unittest; exit 77 (ctest: skipped) when the Debian
Python modules are missing, naming them and the package that installs them."""
import importlib
import sys
import unittest

NEEDED = {"grpc": "python3-grpcio", "google.protobuf": "python3-protobuf",
          "numpy": "python3-numpy", "astropy": "python3-astropy",
          "fitsio": "python3-fitsio"}

missing = []
for module, package in NEEDED.items():
    try:
        importlib.import_module(module)
    except ImportError:
        missing.append(f"{module} ({package})")
if missing:
    print(f"Skipped: {sys.executable} lacks {', '.join(missing)}: run scripts/install-deps.sh")
    sys.exit(77)
result = unittest.main(module=sys.argv[1], argv=[sys.argv[0], "-v"], exit=False).result
sys.exit(0 if result.wasSuccessful() else 1)
