"""How checks are declared: a name and an async function of the run's context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ascend_plugin.doctor.context import Context
from ascend_plugin.doctor.findings import Finding, NotApplicable

Findings = Finding | Sequence[Finding]
CheckFunction = Callable[[Context], Awaitable[Findings]]


@dataclass(frozen=True)
class Check:
    """A named check; the name is what a skipped finding reports."""

    name: str
    function: CheckFunction

    async def run(self, context: Context) -> list[Finding]:
        """The check's findings; one skipped finding when its groundwork is missing."""
        try:
            result = await self.function(context)
        except NotApplicable as reason:
            return [Finding.skipped(self.name, str(reason))]
        return [result] if isinstance(result, Finding) else list(result)


def check(name: str) -> Callable[[CheckFunction], Check]:
    """Declare a check function under ``name``."""
    return lambda function: Check(name, function)
