"""Ray Tune trial schedulers of raytuner (installed as ``raytuner.schedulers``).

GPTuneBand, the multi-task, multi-fidelity bandit scheduler, lands here; the
package exists so that ``from raytuner.schedulers import ...`` resolves in
normal and editable installs alike.
"""

__all__: list[str] = []
