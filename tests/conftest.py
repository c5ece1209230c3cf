"""Test set-up shared by every test module.

Eight emulated CPU devices must be requested before JAX is first imported, so this runs at collection time.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
