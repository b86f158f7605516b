"""``nox -s image``: build the image with a real container engine and smoke-test it.

Run as ``python -m image_check`` with ``.ci`` on the path (the nox session does
this). Steps, each failing loudly with what went wrong:

1. find an engine (engine.py): a Docker daemon that answers, else one started
   here, else podman; none at all is a skip that says why;
2. the base (base_image.py): the official image when it can be pulled, else a
   stand-in made from Debian packages with the same Python;
3. the build (build.py), with the CA bundle and index pip uses on this machine;
4. size, layers and contents (image_report.py), against the budgets;
5. the smoke test (smoke.py): ``version``, ``doctor --root`` on a fake host
   root (fake_node.py), the plugin in a hardened container against the
   kubelet stand-in on the host, and its CDI spec run through podman's own
   parser (podman_cdi.py).
"""
