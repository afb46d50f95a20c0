"""The committed models are exactly what the generator makes from apis/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_models_match_the_apis():
    done = subprocess.run(
        [sys.executable, str(ROOT / "schemas" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_models_parse_the_example_cluster():
    import yaml
    from modelplane_schemas.inferencecluster import InferenceCluster

    doc = yaml.safe_load((ROOT / "examples" / "clusters" / "gpu-east.yaml").read_text())
    cluster = InferenceCluster.model_validate(doc)
    assert [p.name for p in cluster.spec.nodePools] == ["h100", "l40s"]
    assert cluster.spec.nodePools[1].devices[1].count == 2
