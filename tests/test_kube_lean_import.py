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


# What kubernetes-asyncio must keep for the shells and the client (pyproject.toml pins its upper bound):
# run in an interpreter that imports it whole, so no shell stands in for what is checked.
RELIED_ON = """
import ast, inspect, pathlib
import kubernetes_asyncio.client as client
import kubernetes_asyncio.config as config
from kubernetes_asyncio.client import api_client, configuration
from kubernetes_asyncio.config import config_exception
taken = sorted(
    {
        alias.name
        for path in pathlib.Path(config.__file__).parent.glob("*.py")
        if not path.name.endswith("_test.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "kubernetes_asyncio.client"
        for alias in node.names
    }
)
print(json.dumps({
    "client": client.ApiClient is api_client.ApiClient
    and client.Configuration is configuration.Configuration,
    "config": config.ConfigException is config_exception.ConfigException
    and callable(config.load_incluster_config) and callable(config.load_kube_config),
    "loaders_take": taken,
    "call_api": sorted(inspect.signature(api_client.ApiClient.call_api).parameters),
}))
"""


def test_the_private_names_the_lean_import_and_the_client_rely_on_are_there() -> None:
    result = run(RELIED_ON)
    assert result["client"] is True  # the two modules _lean imports by path define the package's names
    assert result["config"] is True
    assert result["loaders_take"] == ["ApiClient", "Configuration"]  # what the shell is given
    call_api = result["call_api"]
    assert isinstance(call_api, list)
    used = {"path_params", "query_params", "header_params", "body", "auth_settings"}
    assert used | {"_preload_content", "_request_timeout"} <= set(call_api)
