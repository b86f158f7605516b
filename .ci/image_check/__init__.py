"""``nox -s image``: build the image for each platform with a real container engine and smoke-test it.

Run as ``python -m image_check`` with ``.ci`` and ``tests`` on the path (the nox
session does this). Steps, each failing loudly with what went wrong:

1. find an engine (engine.py): a Docker daemon that answers, else one started
   here, else podman; none at all is a skip that says why;
2. per platform (platforms.py: linux/amd64 and linux/arm64), what it needs
   here: qemu through binfmt_misc for the one this machine does not run
   natively (emulation.py), and the C fake libdcmi.so compiled for it; a
   platform that cannot be had here is skipped, saying why;
3. the bases (base_image.py), made in parallel: the official image when it
   can be pulled, else a stand-in made from Debian packages with the same
   Python, for the platform's architecture;
4. per platform, one after the other: the build (build.py), with the CA
   bundle and index pip uses on this machine; size, layers and contents
   (image_report.py), against the budgets; the smoke test (smoke.py):
   ``version``, ``doctor --root`` on a fake host root (fake_node.py), the
   plugin in a hardened container against the kubelet stand-in on the host;
5. the CDI spec the native image's plugin wrote, through podman's own parser
   (podman_cdi.py);
6. both images' sizes and layers, and what each platform's steps took.
"""
