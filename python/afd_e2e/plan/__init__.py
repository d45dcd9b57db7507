"""Plans: the pure step from a profile (plus gates, devices and a port base) to the exact processes to launch."""

from afd_e2e.plan.build import build_plan
from afd_e2e.plan.model import CasePlan, ProcessPlan, RunPlan

__all__ = ["CasePlan", "ProcessPlan", "RunPlan", "build_plan"]
