"""The Kubernetes client is imported without kubernetes-asyncio's generated API classes and models.

Each check runs in a fresh interpreter: this test process has long imported all of it.
"""

from __future__ import annotations

import json
import subprocess
import sys

from waiting import WAIT

# What of kubernetes_asyncio is loaded, as a JSON line.
REPORT = """
loaded = sorted(name for name in sys.modules if name.startswith("kubernetes_asyncio"))
print(json.dumps({
    "count": len(loaded),
    "models": [name for name in loaded if name.startswith("kubernetes_asyncio.client.models.")],
    "apis": [name for name in loaded if name.startswith("kubernetes_asyncio.client.api.")],
}))
"""


def run(script: str) -> dict[str, object]:
    completed = subprocess.run(
        [sys.executable, "-c", "import json, sys\n" + script],
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def test_the_client_loads_no_api_class_and_no_model() -> None:
    result = run("import ascend_plugin.kubeapi.client\n" + REPORT)
    assert result["models"] == []
    assert result["apis"] == []
    count = result["count"]
    assert isinstance(count, int)
    assert count < 30  # the client, its configuration, REST layer and the config loaders


def test_anything_else_asked_of_the_package_loads_it_whole() -> None:
    result = run(
        "import ascend_plugin.kubeapi.client\n"
        "import kubernetes_asyncio\n"
        "from kubernetes_asyncio.client import AuthorizationV1Api, V1Node\n"
        "from kubernetes_asyncio.client.models import V1Pod\n"
        "assert AuthorizationV1Api.__name__ == 'AuthorizationV1Api'\n"
        "assert V1Node(metadata={'name': 'n'}).metadata == {'name': 'n'}\n"
        "assert V1Pod.__module__ == 'kubernetes_asyncio.client.models.v1_pod'\n"
        "assert kubernetes_asyncio.watch.Watch is not None\n"
        "assert kubernetes_asyncio.__version__\n" + REPORT
    )
    models, apis = result["models"], result["apis"]
    assert isinstance(models, list)
    assert isinstance(apis, list)
    assert "kubernetes_asyncio.client.models.v1_node" in models
    assert "kubernetes_asyncio.client.api.authorization_v1_api" in apis


def test_a_client_imported_whole_before_is_used_as_it_is() -> None:
    result = run(
        "import kubernetes_asyncio.client\n"
        "from ascend_plugin.kubeapi.client import ApiClient, Configuration\n"
        "assert ApiClient is kubernetes_asyncio.client.ApiClient\n"
        "assert Configuration is kubernetes_asyncio.client.Configuration\n" + REPORT
    )
    apis = result["apis"]
    assert isinstance(apis, list)
    assert "kubernetes_asyncio.client.api.core_v1_api" in apis
