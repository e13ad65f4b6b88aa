"""The Volcano models read and write what the v1.15 CRDs and admission accept, and nothing else."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from vcjob_factory import vcjob

from components.volcano.models import (
    Container,
    Job,
    JobSpec,
    LifecyclePolicy,
    ObjectMeta,
    PodSpec,
    PodTemplateSpec,
    TaskSpec,
    apply_volcano_defaults,
    parse_job,
    validate_job,
)
from components.volcano.queue_admission import validate_queue, validate_queue_tree
from components.volcano.scheduling_models import parse_podgroup, parse_queue

JOB_YAML = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: llm-finetune
  namespace: ml
  labels: {team: nlp}
  annotations: {vcpilot.io/attempt: "2"}
spec:
  schedulerName: volcano
  minAvailable: 3
  queue: gpu-queue
  priorityClassName: high-priority
  maxRetry: 5
  ttlSecondsAfterFinished: 600
  plugins:
    pytorch: ["--master=master", "--worker=worker", "--port=23456"]
    svc: []
  policies:
    - event: PodEvicted
      action: RestartJob
    - events: [PodFailed, Unknown]
      action: RestartJob
      timeout: 5m
    - exitCode: 3
      action: AbortJob
  volumes:
    - mountPath: /workspace
      volumeClaimName: workspace-pvc
  tasks:
    - name: master
      replicas: 1
      minAvailable: 1
      maxRetry: 2
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        metadata:
          labels: {role: master}
        spec:
          restartPolicy: Never
          hostNetwork: false
          nodeSelector: {gpu: h100}
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
          containers:
            - name: trainer
              image: ghcr.io/acme/train:1.0
              command: [python, -m, train]
              args: [--epochs, "1"]
              workingDir: /workspace
              env:
                - {name: LR, value: "0.0001"}
                - name: POD_IP
                  valueFrom: {fieldRef: {fieldPath: status.podIP}}
              resources:
                requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: 1}
                limits: {cpu: 4, memory: 16Gi, nvidia.com/gpu: 1}
              volumeMounts: [{name: shm, mountPath: /dev/shm}]
              ports: [{containerPort: 8080, name: metrics}]
              securityContext: {runAsNonRoot: true}
          volumes: [{name: shm, emptyDir: {medium: Memory}}]
    - name: worker
      replicas: 2
      dependsOn: {name: [master]}
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: trainer
              image: ghcr.io/acme/train:1.0
              resources:
                limits: {cpu: 500m, memory: 8Gi}
"""

QUEUE_YAML = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: gpu-queue}
spec:
  weight: 4
  reclaimable: true
  capability: {cpu: "64", memory: 512Gi, nvidia.com/gpu: 8}
  deserved: {nvidia.com/gpu: 4}
  guarantee: {resource: {nvidia.com/gpu: 2}}
  parent: root
  priority: 10
  affinity: {nodeGroupAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [group-a]}}
  extendClusters: [{name: c1, weight: 2, capacity: {cpu: "8"}}]
status:
  state: Open
  allocated: {cpu: "8", nvidia.com/gpu: 2}
  reservation: {nodes: [node-1]}
"""

PODGROUP_YAML = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: llm-finetune-0d1e
  namespace: ml
  ownerReferences: [{apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: llm-finetune, uid: abc}]
spec:
  minMember: 3
  minTaskMember: {master: 1, worker: 2}
  queue: gpu-queue
  priorityClassName: high-priority
  minResources: {cpu: 9, memory: 32Gi, nvidia.com/gpu: 3}
status:
  phase: Running
  running: 3
  conditions:
    - {type: Scheduled, status: "True", lastTransitionTime: "2026-01-01T00:00:00Z", transitionID: x}
"""


def crd_validator(shared_dir: Path, filename: str) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load((shared_dir / "schemas" / "volcano-v1.15.1" / filename).read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def assert_valid(validator: jsonschema.protocols.Validator, manifest: dict[str, Any]) -> None:
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(manifest)]
    assert not errors, errors


@pytest.fixture(scope="module")
def job_schema(shared_dir: Path) -> jsonschema.protocols.Validator:
    return crd_validator(shared_dir, "batch.volcano.sh_jobs.yaml")


def job_dict() -> dict[str, Any]:
    return yaml.safe_load(JOB_YAML)


def rejects(data: dict[str, Any] | str) -> str:
    with pytest.raises(ValueError) as caught:
        parse_job(data)
    message = str(caught.value)
    assert "\n" not in message
    return message


def refuses(job: Job) -> str:
    with pytest.raises(ValueError) as caught:
        validate_job(job)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---- round trip ---------------------------------------------------------------------------------------


def test_job_yaml_round_trips_field_for_field() -> None:
    job = parse_job(JOB_YAML)
    assert job.to_dict() == job_dict()
    assert job.spec.tasks[0].template.spec.containers[0].resources.requests["nvidia.com/gpu"] == 1
    assert job.spec.policies[2].exit_code == 3
    assert job.spec.tasks[1].depends_on and job.spec.tasks[1].depends_on.name == ["master"]


def test_job_text_may_be_json_and_dict_input_works_too() -> None:
    import json

    assert parse_job(json.dumps(job_dict())) == parse_job(job_dict()) == parse_job(JOB_YAML)


def test_hand_written_job_passes_crd_schema_and_admission(job_schema) -> None:
    job = parse_job(JOB_YAML)
    assert_valid(job_schema, job.to_dict())
    validate_job(job)


def test_snake_case_construction_serializes_camel_case() -> None:
    job = Job(
        metadata=ObjectMeta(name="tiny", namespace="default"),
        spec=JobSpec(
            min_available=1,
            ttl_seconds_after_finished=60,
            tasks=[
                TaskSpec(
                    name="main",
                    replicas=1,
                    template=PodTemplateSpec(
                        spec=PodSpec(
                            containers=[Container(name="c", image="busybox", working_dir="/tmp")],
                            restart_policy="Never",
                        )
                    ),
                )
            ],
            policies=[LifecyclePolicy(exit_code=2, action="AbortJob")],
        ),
    )
    data = job.to_dict()
    assert data["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert data["spec"]["ttlSecondsAfterFinished"] == 60
    assert data["spec"]["policies"] == [{"exitCode": 2, "action": "AbortJob"}]
    assert data["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["workingDir"] == "/tmp"
    assert "status" not in data
    assert parse_job(data) == job


def test_quantities_as_numbers_and_strings_pass_the_schema(job_schema) -> None:
    data = job_dict()
    resources = data["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"] = {"cpu": 2, "memory": "8Gi", "nvidia.com/gpu": 8}
    resources["requests"] = {"cpu": "1500m", "memory": 1073741824, "nvidia.com/gpu": "8"}
    assert_valid(job_schema, parse_job(data).to_dict())
    resources["limits"]["cpu"] = "lots"
    assert list(job_schema.iter_errors(data)), "the CRD pattern should refuse 'lots'"


def test_status_written_by_the_controller_is_read() -> None:
    data = job_dict()
    data["status"] = {
        "state": {"phase": "Running", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        "minAvailable": 3,
        "running": 3,
        "retryCount": 1,
        "taskStatusCount": {"master": {"phase": {"Running": 1}}, "worker": {"phase": {"Running": 2}}},
        "controlledResources": {"plugin-svc": "svc"},
        "conditions": [{"status": "Running", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "someFutureField": 1,
    }
    job = parse_job(data)
    assert job.status.state.phase == "Running"
    assert job.status.task_status_count["worker"].phase == {"Running": 2}
    assert job.to_dict() == data


# ---- metav1.Duration fields: a policy's timeout, runningEstimate, status.runningDuration ------------------


def _task_timeout(data: dict[str, Any], value: object) -> None:
    data["spec"]["tasks"][1]["policies"] = [{"event": "PodFailed", "action": "RestartTask", "timeout": value}]


_DURATION_FIELDS = [
    ("spec.policies[1].timeout", lambda d, v: d["spec"]["policies"][1].update(timeout=v)),
    ("spec.tasks[1].policies[0].timeout", _task_timeout),
    ("spec.runningEstimate", lambda d, v: d["spec"].update(runningEstimate=v)),
    ("status.runningDuration", lambda d, v: d.update(status={"runningDuration": v})),
]


@pytest.mark.parametrize(("path", "put"), _DURATION_FIELDS)
@pytest.mark.parametrize("value", ["10x", "1.5", "abc", "-", "", "1d", " 30s", "5 m"])
def test_a_duration_go_cannot_parse_is_one_sentence_naming_the_field(path, put, value: str) -> None:
    """They were free text: the API server stored "10x", and Volcano's controller could not decode the Job."""
    data = job_dict()
    put(data, value)
    assert rejects(data) == (
        f"{path}: {value!r} is not a duration (Go's time.ParseDuration: a number with a unit such as 30s, 5m, 1h30m)"
    )


@pytest.mark.parametrize(("path", "put"), _DURATION_FIELDS)
@pytest.mark.parametrize(("value", "shown"), [(30, "30"), (1.5, "1.5"), (0, "0"), (True, "true")])
def test_a_bare_number_is_not_a_duration(path, put, value: object, shown: str) -> None:
    """metav1.Duration's UnmarshalJSON takes only a JSON string (and the CRD says `type: string`): `timeout: 30`."""
    data = job_dict()
    put(data, value)
    assert rejects(data) == f'{path}: {shown} is not a duration: write it as a string with its unit, e.g. "30s" or "5m"'


@pytest.mark.parametrize(("path", "put"), _DURATION_FIELDS)
@pytest.mark.parametrize("value", ["1h30m", "0", "-1s", "500ms", "1.5h", ".5m", "2562047h47m16.854775807s"])
def test_every_duration_go_parses_is_kept_as_written(path, put, value: str, job_schema) -> None:
    data = job_dict()
    put(data, value)
    job = parse_job(data)
    assert job.to_dict() == data
    assert_valid(job_schema, {k: v for k, v in job.to_dict().items() if k != "status"})


def test_a_duration_beyond_gos_range_says_so() -> None:
    data = job_dict()
    data["spec"]["policies"][1]["timeout"] = "2562047h47m16.854775808s"
    assert rejects(data) == (
        "spec.policies[1].timeout: '2562047h47m16.854775808s' is longer than a duration can be (about 292 years)"
    )


# ---- parse errors: one sentence naming the field ------------------------------------------------------


def test_typo_in_spec_is_rejected_with_a_suggestion() -> None:
    data = job_dict()
    data["spec"]["minAvaliable"] = data["spec"].pop("minAvailable")
    assert rejects(data) == "unknown field spec.minAvaliable (did you mean minAvailable?)"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["spec"]["tasks"][1].update(replica=2), "unknown field spec.tasks[1].replica"),
        (lambda d: d["spec"]["policies"][0].update(evnt="PodFailed"), "unknown field spec.policies[0].evnt"),
        (lambda d: d.update(specs={}), "unknown field specs"),
        # a key with a newline or a space is quoted: the sentence stays one line and names the key findably
        (lambda d: d["spec"].update({"\n0": None}), "unknown field spec.'\\n0'"),
        (lambda d: d["spec"].update({"min Available": 1}), "unknown field spec.'min Available'"),
        (
            lambda d: d["spec"]["tasks"][0].update(replicas=-1),
            "spec.tasks[0].replicas: value must be at least 0",
        ),
        (lambda d: d["spec"].update(maxRetry=-2), "spec.maxRetry: value must be at least 0"),
        (
            lambda d: d["spec"]["policies"][0].update(event="PodCrashed"),
            "spec.policies[0].event: 'PodCrashed'",
        ),
        (lambda d: d["spec"].update(queue="GPU_queue"), "spec.queue: 'GPU_queue' must be"),
        (
            lambda d: d.update(apiVersion="batch.volcano.sh/v1"),
            "apiVersion: 'batch.volcano.sh/v1' is not allowed",
        ),
        (lambda d: d["spec"]["tasks"][0].pop("template"), "spec.tasks[0].template: field is required"),
        (
            lambda d: d["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["resources"]["limits"].update(
                cpu="lots"
            ),
            "spec.tasks[1].template.spec.containers[0].resources.limits.cpu: quantity 'lots'",
        ),
        (
            lambda d: d["spec"]["tasks"][0].update(topologyPolicy="best"),
            "spec.tasks[0].topologyPolicy: 'best'",
        ),
        # The API server refuses a boolean or a quoted number where the CRD says integer; pydantic alone read them
        # as 1 and 2 (so `replicas: true` was a gang of one, and its minAvailable "greater than the replicas").
        (
            lambda d: d["spec"]["tasks"][0].update(replicas=True),
            "spec.tasks[0].replicas: expected a whole number, got true",
        ),
        (lambda d: d["spec"].update(minAvailable="2"), "spec.minAvailable: expected a whole number, got the text '2'"),
        (lambda d: d["spec"]["policies"][0].update(exitCode="3"), "spec.policies[0].exitCode: expected a whole number"),
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"].update(terminationGracePeriodSeconds="30"),
            "spec.tasks[0].template.spec.terminationGracePeriodSeconds: expected a whole number, got the text '30'",
        ),
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"].update(terminationGracePeriodSeconds=2**63),
            "spec.tasks[0].template.spec.terminationGracePeriodSeconds: value must be at most 9223372036854775807",
        ),
        # labels, annotation keys and node selectors as the API server checks them
        (lambda d: d["metadata"].update(labels={"my app": "x"}), "metadata.labels: key 'my app' must be a name"),
        (lambda d: d["metadata"].update(labels={"app": "x y"}), "metadata.labels: value 'x y' must be empty"),
        (lambda d: d["metadata"].update(labels={"app": "a" * 64}), "metadata.labels: value 'aaaa"),
        (lambda d: d["metadata"].update(annotations={"-note": "any text at all"}), "metadata.annotations: key '-note'"),
        (
            lambda d: d["spec"]["tasks"][0]["template"].update(metadata={"labels": {"UPPER/x": "1"}}),
            "spec.tasks[0].template.metadata.labels: key 'UPPER/x' must be a name",
        ),
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"].update(nodeSelector={"gpu": "a100 80g"}),
            "spec.tasks[0].template.spec.nodeSelector: value 'a100 80g' must be empty",
        ),
        # spec.volumes, spec.networkTopology and dependsOn as the CRD types them (they were free mappings, so a
        # claim name Volcano's validateIO refuses, a mode outside the enum or a typo passed)
        (
            lambda d: d["spec"]["volumes"][0].update(volumeClaimName="Workspace_PVC"),
            "spec.volumes[0].volumeClaimName: 'Workspace_PVC' must be a lowercase RFC 1123 name",
        ),
        (lambda d: d["spec"]["volumes"][0].update(mountPath=5), "spec.volumes[0].mountPath: expected text, got 5"),
        (lambda d: d["spec"]["volumes"][0].pop("mountPath"), "spec.volumes[0].mountPath: field is required"),
        (
            lambda d: d["spec"]["volumes"][0].update(mountpath="/w"),
            "unknown field spec.volumes[0].mountpath (did you mean mountPath?)",
        ),
        (
            lambda d: d["spec"]["volumes"].append(
                {"mountPath": "/d", "volumeClaim": {"resources": {"requests": {"storage": "lots"}}}}
            ),
            "spec.volumes[1].volumeClaim.resources.requests.storage: quantity 'lots'",
        ),
        (lambda d: d["spec"].update(networkTopology={"mode": "strict"}), "spec.networkTopology.mode: 'strict' is not"),
        (
            lambda d: d["spec"].update(networkTopology={"highestTierAllowed": -1}),
            "spec.networkTopology.highestTierAllowed: value must be at least 0, got -1",
        ),
        (lambda d: d["spec"].update(networkTopology={"tier": 1}), "unknown field spec.networkTopology.tier"),
        (
            lambda d: d["spec"]["tasks"][1].update(dependsOn={"name": "master"}),
            "spec.tasks[1].dependsOn.name: expected a list, got 'master'",
        ),
        (
            lambda d: d["spec"]["tasks"][1]["template"]["spec"].update(activeDeadlineSeconds=0),
            "spec.tasks[1].template.spec.activeDeadlineSeconds: value must be at least 1, got 0",
        ),
        (
            lambda d: d["spec"]["tasks"][1].update(dependsOn={"names": ["master"]}),
            "unknown field spec.tasks[1].dependsOn.names",
        ),
    ],
)
def test_bad_manifest_gets_one_sentence(mutate, expected: str) -> None:
    data = job_dict()
    mutate(data)
    assert rejects(data).startswith(expected)


def test_labels_and_numbers_kubernetes_accepts_are_kept() -> None:
    data = job_dict()
    data["metadata"]["labels"] = {"example.com/team": "ml_infra.v2", "empty": "", "A": "B"}
    data["metadata"]["annotations"] = {"example.com/note": "free text: spaces, UPPER and all"}
    data["spec"]["maxRetry"] = 3.0  # a float without a fraction is a JSON integer to the API server
    job = parse_job(data)
    assert job.metadata.labels["example.com/team"] == "ml_infra.v2" and job.spec.max_retry == 3


def test_pod_fields_kubernetes_accepts_pass_admission() -> None:
    data = job_dict()
    _pod(data)["tolerations"] = [
        {"operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30},
    ]
    _pod(data)["volumes"] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
        {"name": "host", "hostPath": {"path": "/mnt/cache", "type": "DirectoryOrCreate"}},
    ]
    _pod(data)["containers"][0]["volumeMounts"] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "data", "mountPath": "/data", "subPath": "train/v1", "readOnly": True},
        {"name": "host", "mountPath": "/cache", "mountPropagation": "HostToContainer"},
    ]
    _pod(data)["containers"][0]["env"] = [{"name": "my.var-1", "value": "x"}, {"name": "EMPTY"}]
    _pod(data)["containers"][0]["ports"] = [{"containerPort": 8080, "name": "http", "protocol": "UDP", "hostPort": 1}]
    _pod(data)["hostname"], _pod(data)["serviceAccountName"] = "worker-0", "trainer.sa"
    _pod(data)["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "minDomains": 2,
        },
        {"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    _pod(data)["containers"][0]["readinessProbe"] = {
        "httpGet": {"path": "/health", "port": 8080},
        "successThreshold": 3,
    }
    # an empty policy is unset, and the API server's defaults fill it in (restartPolicy: '' was refused)
    _pod(data).update(restartPolicy="", dnsPolicy="", activeDeadlineSeconds=3600, nodeName="node-1.gpu")
    _pod(data)["containers"][0].update(imagePullPolicy="", terminationMessagePolicy="FallbackToLogsOnError")
    _pod(data)["containers"][0]["env"].append(
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    )
    _pod(data)["containers"][0]["ports"].append({"containerPort": 8081, "name": "metrics-2"})
    # queue '' is unset: Volcano's mutating webhook writes `default` before the CRD's pattern is checked (refused)
    data["spec"]["queue"] = ""
    assert apply_volcano_defaults(parse_job(data)).spec.queue == "default"
    validate_job(parse_job(data))


def test_pod_side_stays_permissive() -> None:
    data = job_dict()
    data["spec"]["tasks"][0]["template"]["spec"]["dnsPolicy"] = "ClusterFirstWithHostNet"
    data["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["livenessProbe"] = {"exec": {"command": ["true"]}}
    assert parse_job(data).to_dict() == data


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("spec: [", "the Job manifest is not valid YAML or JSON at line 1"),
        ('{"spec": ', "the Job manifest is not valid YAML or JSON at line 1"),
        ("- a\n- b\n", "a Job manifest must be a mapping of fields, got list"),
    ],
)
def test_unreadable_text_gets_one_sentence(text: str, expected: str) -> None:
    assert rejects(text).startswith(expected)


# ---- admission rules ----------------------------------------------------------------------------------


def _pod(data: dict) -> dict:
    return data["spec"]["tasks"][0]["template"]["spec"]


def test_exit_code_policies_the_webhook_takes_pass_admission() -> None:
    # validatePolicies checks an event policy's action, never an exitCode policy's: without one, or with one the
    # controller does not act on, a matching exit syncs the job. Both were refused ("needs an action", "not allowed").
    data = job_dict()
    data["spec"]["policies"] += [
        {"exitCode": 4},
        {"exitCode": 5, "action": "SyncJob"},
        {"exitCode": 6, "action": "Hold"},
    ]
    data["spec"]["tasks"][0]["policies"] = [{"exitCode": 7}]
    validate_job(parse_job(data))


def modified(mutate) -> Job:
    data = job_dict()
    mutate(data)
    return parse_job(data)


def _long_worker(d: dict[str, Any]) -> None:
    d["metadata"]["name"] = "a" * 53
    d["spec"]["tasks"][1]["replicas"] = 1000


def _add_task(d: dict[str, Any], name: str, **extra: Any) -> None:
    task = copy.deepcopy(d["spec"]["tasks"][1])
    task.update(name=name, **extra)
    d["spec"]["tasks"].append(task)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["spec"].update(tasks=[]), "spec.tasks must list at least one task"),
        (lambda d: d["metadata"].update(name="LLM_Finetune"), "job name 'LLM_Finetune' must be"),
        (lambda d: d["metadata"].update(name="a" * 64), "must be at most 63 characters"),
        (lambda d: d["metadata"].pop("name"), "metadata.name is required"),
        # LocalCluster keeps a pod's logs under logs/<namespace>/: '..' would write beside its state
        (lambda d: d["metadata"].update(namespace=".."), "metadata.namespace '..' must be a lowercase RFC 1123"),
        (lambda d: d["metadata"].update(namespace="a/b"), "metadata.namespace 'a/b' must be"),
        (lambda d: d["metadata"].update(namespace="Team"), "metadata.namespace 'Team' must be"),
        # the API server's pod rules: restart policy, container names (a label, unique in the pod)
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"].update(restartPolicy="Sometimes"),
            "spec.tasks[0].template.spec.restartPolicy 'Sometimes' is not one of Always, OnFailure, Never",
        ),
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"]["containers"][0].update(name="Main"),
            "spec.tasks[0].template.spec.containers[0].name 'Main' must be a lowercase RFC 1123 label",
        ),
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"]["containers"].append(
                copy.deepcopy(d["spec"]["tasks"][0]["template"]["spec"]["containers"][0])
            ),
            "spec.tasks[0].template.spec.containers[1].name",
        ),
        # what the scheduler reads of a node affinity, refused at admission rather than met as an AttributeError
        (
            lambda d: d["spec"]["tasks"][0]["template"]["spec"].update(affinity={"nodeAffinity": "x"}),
            "spec.tasks[0].template.spec.affinity.nodeAffinity must be an object",
        ),
        (
            lambda d: d["spec"]["tasks"][1]["template"]["spec"].update(
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "gpu", "operator": "Maybe", "values": ["a"]}]}
                            ]
                        }
                    }
                }
            ),
            "nodeSelectorTerms[0].matchExpressions[0].operator 'Maybe' is not one of In, NotIn",
        ),
        (lambda d: d["spec"]["tasks"][0].update(name="Master"), "spec.tasks[0].name 'Master' must be a lowercase"),
        (lambda d: _add_task(d, "worker"), "spec.tasks[2].name 'worker' is used by two tasks"),
        (
            lambda d: d["spec"]["tasks"][0].update(minAvailable=2),
            "spec.tasks[0].minAvailable 2 is greater than",
        ),
        (
            lambda d: d["spec"].update(minAvailable=4),
            "spec.minAvailable 4 is greater than the 3 replicas of all tasks",
        ),
        (
            lambda d: d["spec"]["policies"][2].update(event="PodFailed"),
            "must not set both an event and an exitCode",
        ),
        (
            lambda d: d["spec"]["policies"][2].update(exitCode=0),
            "spec.policies[2].exitCode 0 is not an error code",
        ),
        (
            lambda d: d["spec"]["policies"].append({"exitCode": 3, "action": "RestartJob"}),
            "exitCode 3 appears in two",
        ),
        (
            lambda d: d["spec"]["policies"].append({"action": "RestartJob"}),
            "must set an event, events or an exitCode",
        ),
        (
            lambda d: d["spec"]["policies"][0].update(events=["PodFailed"]),
            "event 'PodFailed' appears in two policies",
        ),
        (lambda d: d["spec"]["policies"].append({"event": "*", "action": "AbortJob"}), "uses the '*' event"),
        (lambda d: d["spec"]["policies"][0].update(event="PodRunning"), "event 'PodRunning' is not one of"),
        (lambda d: d["spec"]["policies"][0].update(action="SyncJob"), "action 'SyncJob' is not one of"),
        (lambda d: d["spec"]["policies"][0].update(action="Restart"), "spec.policies[0].action 'Restart' is not one"),
        (lambda d: d["spec"]["policies"][0].pop("action"), "spec.policies[0] needs an action"),
        (
            lambda d: d["spec"]["tasks"][0]["policies"][0].update(event="OutOfSync"),
            "spec.tasks[0].policies[0] event 'OutOfSync' is not one of",
        ),
        (_long_worker, f"pod name '{'a' * 53}-worker-999' would be 64 characters"),
        (lambda d: d["spec"]["plugins"].update(horovod=[]), "spec.plugins names 'horovod'"),
        (
            lambda d: d["spec"]["plugins"].update(mpi=["--master=launcher"]),
            "the mpi plugin needs a task named 'launcher'",
        ),
        (lambda d: d["spec"]["tasks"][0].update(dependsOn={"name": ["worker"]}), "form a cycle"),
        (
            lambda d: d["spec"]["tasks"][1].update(dependsOn={"name": ["ps"]}),
            "depends on 'ps', which is not a task",
        ),
        (
            lambda d: d["spec"]["volumes"].append({"mountPath": "/workspace", "volumeClaimName": "b"}),
            "mounted twice",
        ),
        (lambda d: d["spec"]["volumes"][0].update(volumeClaim={}), "not both"),
        (lambda d: d["spec"]["volumes"][0].pop("volumeClaimName"), "needs volumeClaimName"),
        (
            lambda d: d["spec"]["volumes"][0].update(mountPath="C:/w"),
            "spec.volumes[0].mountPath 'C:/w' must not contain ':'",
        ),
        (
            lambda d: d["spec"]["tasks"][1].update(partitionPolicy={"totalPartitions": 2, "partitionSize": 2}),
            "spec.tasks[1].replicas 2 must equal totalPartitions × partitionSize",
        ),
        (
            lambda d: d["spec"]["tasks"][1].update(topologyPolicy="single-numa-node"),
            "needs a whole number of CPUs",
        ),
        # validateTaskTopoPolicy reads requests alone when a container has any, and checks init containers too
        (
            lambda d: (
                d["spec"]["tasks"][0].update(topologyPolicy="restricted"),
                _pod(d)["containers"][0]["resources"].update(requests={"memory": "16Gi"}),
            ),
            "spec.tasks[0].template.spec.containers[0] needs a whole number of CPUs requested",
        ),
        (
            lambda d: (
                d["spec"]["tasks"][0].update(topologyPolicy="best-effort"),
                _pod(d).update(initContainers=[{"name": "setup", "image": "busybox", "command": ["true"]}]),
            ),
            "spec.tasks[0].template.spec.initContainers[0] needs a whole number of CPUs requested",
        ),
        (
            lambda d: d["spec"].update(networkTopology={"highestTierAllowed": 1, "highestTierName": "rack"}),
            "must not set both highestTierAllowed and highestTierName",
        ),
        (lambda d: d["spec"]["tasks"][1]["template"]["spec"].update(containers=[]), "at least one container"),
        # core/v1 ValidateTolerations
        (lambda d: _pod(d).update(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]), "operator Exists"),
        (lambda d: _pod(d).update(tolerations=[{"key": "k", "operator": "In"}]), "operator 'In' is not Equal or"),
        (lambda d: _pod(d).update(tolerations=[{"value": "v"}]), "has no key, so its operator must be Exists"),
        (lambda d: _pod(d).update(tolerations=[{"key": "k", "effect": "Never"}]), "effect 'Never' is not one of"),
        (lambda d: _pod(d).update(tolerations=[{"key": "a b"}]), "tolerations[0]: key 'a b' must be a name"),
        (lambda d: _pod(d).update(tolerations=[{"key": 5}]), "tolerations[0].key: expected text, got 5"),
        (
            lambda d: _pod(d).update(tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]),
            "only a NoExecute effect may have",
        ),
        # core/v1 validateContainers and ValidatePodSpec: a `=` in an env name was an internal error (os.environ)
        (lambda d: _pod(d)["containers"][0].update(env=[{"name": "A=B"}]), "env[0].name 'A=B' must be printable"),
        (
            lambda d: _pod(d)["containers"][0].update(env=[{"name": "A", "value": "x", "valueFrom": {"a": 1}}]),
            "env[0] 'A' must set value or valueFrom, not both",
        ),
        (lambda d: _pod(d)["containers"][0].update(ports=[{"containerPort": 0}]), "containerPort must be a port"),
        (lambda d: _pod(d)["containers"][0].update(ports=[{"containerPort": "80"}]), "65535, got '80'"),
        (lambda d: _pod(d)["containers"][0].update(ports=[{"name": "http"}]), "containerPort must be a port number"),
        (
            lambda d: _pod(d)["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 70000}]),
            "ports[0].hostPort must be a port number from 1 to 65535, got 70000",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(ports=[{"containerPort": 80, "protocol": "HTTP"}]),
            "protocol 'HTTP' is not one of TCP, UDP, SCTP",
        ),
        (lambda d: _pod(d)["containers"][0].update(imagePullPolicy="Sometimes"), "imagePullPolicy 'Sometimes'"),
        (lambda d: _pod(d).update(serviceAccountName="Bad SA"), "serviceAccountName 'Bad SA' must be"),
        # core/v1 host ports, topology spread constraints and probes: they all passed
        (
            lambda d: (
                _pod(d).update(hostNetwork=True),
                _pod(d)["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 81}]),
            ),
            "containers[0].ports[0].hostPort 81 must equal its containerPort 80 on hostNetwork",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(
                ports=[{"containerPort": 80, "hostPort": 9000}, {"containerPort": 81, "hostPort": 9000}]
            ),
            "containers[0].ports[1] asks for host port 9000/TCP, which another port of the pod has",
        ),
        (
            lambda d: _pod(d).update(
                topologySpreadConstraints=[{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
            ),
            "topologySpreadConstraints[0].maxSkew must be a whole number greater than 0, got 0",
        ),
        (
            lambda d: _pod(d).update(
                topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]
            ),
            "topologySpreadConstraints[0].whenUnsatisfiable 'Maybe' is not one of DoNotSchedule, ScheduleAnyway",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(
                livenessProbe={"httpGet": {"port": 80}, "exec": {"command": ["x"]}}
            ),
            "containers[0].livenessProbe must set exactly one of exec, httpGet, tcpSocket, grpc",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(startupProbe={"tcpSocket": {"port": 80}, "successThreshold": 2}),
            "containers[0].startupProbe.successThreshold must be 1, not 2",
        ),
        # core/v1 validateVolumeSource and ValidateVolumeMounts: they all passed
        (lambda d: _pod(d).update(volumes=[{"name": "v", "persistentVolumeClaim": {}}]), "claimName is required"),
        (lambda d: _pod(d).update(volumes=[{"name": "v", "configMap": {"items": []}}]), "configMap.name is required"),
        (lambda d: _pod(d).update(volumes=[{"name": "v", "secret": {"name": "s"}}]), "secret.secretName is required"),
        (
            lambda d: _pod(d).update(volumes=[{"name": "v", "hostPath": {"path": "/data", "type": "Folder"}}]),
            "volumes[0].hostPath.type 'Folder' is not one of DirectoryOrCreate",
        ),
        (
            lambda d: _pod(d).update(volumes=[{"name": "v", "hostPath": {"path": "/data/../etc"}}]),
            "volumes[0].hostPath.path '/data/../etc' must not contain '..'",
        ),
        (
            lambda d: _pod(d).update(volumes=[{"name": "v", "emptyDir": {"sizeLimit": "lots"}}]),
            "volumes[0].emptyDir.sizeLimit 'lots' must be a size such as 1Gi",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(
                volumeMounts=[{"name": "shm", "mountPath": "/d", "subPath": "../x"}]
            ),
            "volumeMounts[0].subPath '../x' must be a relative path without '..'",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(
                volumeMounts=[{"name": "shm", "mountPath": "/d", "mountPropagation": "Sideways"}]
            ),
            "volumeMounts[0].mountPropagation 'Sideways' is not one of None, HostToContainer, Bidirectional",
        ),
        # core/v1 ValidatePodSpec and validateContainers: they all passed
        (
            lambda d: _pod(d)["containers"][0].pop("image"),
            "spec.tasks[0].template.spec.containers[0].image is required",
        ),
        # an image the API server takes and no node can pull (a trailing space, a newline, no name before the tag)
        (
            lambda d: _pod(d)["containers"][0].update(image="busybox "),
            "spec.tasks[0].template.spec.containers[0].image is 'busybox ', which is not an image reference",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(image="busybox\n"),
            "spec.tasks[0].template.spec.containers[0].image is 'busybox\\n', which is not an image reference",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(image=":evil.io/x"),
            "spec.tasks[0].template.spec.containers[0].image is ':evil.io/x', which is not an image reference",
        ),
        (
            lambda d: _pod(d).update(dnsPolicy="Cluster"),
            "spec.tasks[0].template.spec.dnsPolicy 'Cluster' is not one of",
        ),
        (lambda d: _pod(d).update(nodeName="Node_1"), "spec.tasks[0].template.spec.nodeName 'Node_1' must be"),
        (lambda d: _pod(d).update(priorityClassName="High"), "template.spec.priorityClassName 'High' must be"),
        (
            lambda d: _pod(d)["containers"][0].update(env=[{"name": "A", "valueFrom": {}}]),
            "containers[0].env[0].valueFrom of 'A' must set exactly one of configMapKeyRef, fieldRef",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(ports=[{"containerPort": 80, "name": "Http_Port"}]),
            "containers[0].ports[0].name 'Http_Port' must be at most 15 of a-z, 0-9 and '-'",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(ports=[{"containerPort": 80, "name": "http"}] * 2),
            "containers[0].ports[1].name 'http' names two ports of the container",
        ),
        (
            lambda d: _pod(d)["containers"][0].update(terminationMessagePolicy="Logs"),
            "containers[0].terminationMessagePolicy 'Logs' is not one of File, FallbackToLogsOnError",
        ),
        (lambda d: _pod(d).update(hostname="Bad_Host"), "hostname 'Bad_Host' must be a lowercase RFC 1123 label"),
        # core/v1 ValidateVolumes and ValidateVolumeMounts
        (lambda d: _pod(d).update(volumes=[{"name": "v"}]), "volumes[0] needs exactly one source"),
        (lambda d: _pod(d).update(volumes=[{"name": "v", "emptyDir": {}, "hostPath": {}}]), "emptyDir and hostPath"),
        (lambda d: _pod(d).update(volumes=[{"name": "V_1", "emptyDir": {}}]), "volumes[0].name 'V_1' must be"),
        (lambda d: _pod(d).update(volumes=[{"name": "v", "emptyDir": {}}] * 2), "'v' is used by two volumes"),
        (
            lambda d: _pod(d)["containers"][0].update(volumeMounts=[{"name": "data", "mountPath": "/data"}]),
            "containers[0].volumeMounts[0].name 'data' is not a volume of the pod",
        ),
        (
            lambda d: (
                _pod(d).update(volumes=[{"name": "v", "emptyDir": {}}]),
                _pod(d)["containers"][0].update(volumeMounts=[{"name": "v", "mountPath": "/a"}] * 2),
            ),
            "volumeMounts[1].mountPath '/a' is mounted twice",
        ),
    ],
)
def test_admission_refuses_with_one_sentence(mutate, expected: str) -> None:
    assert expected in refuses(modified(mutate))


def test_a_quantity_beyond_a_float_is_out_of_range_in_one_sentence() -> None:
    def huge(d: dict[str, Any]) -> None:
        d["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1e400"

    with pytest.raises(ValueError, match=r"limits\.nvidia\.com/gpu: quantity '1e400' is out of range$"):
        modified(huge)


def test_pod_name_of_the_last_replica_is_checked_where_it_becomes_the_hostname() -> None:
    # With the svc plugin (pytorch brings it) a pod's name is its hostname, 63 characters at most: the longest
    # name, ending in replicas - 1, must fit.
    def named(replicas: int, plugins: dict[str, list[str]] | None = None):
        def mutate(d: dict[str, Any]) -> None:
            d["metadata"]["name"] = "a" * 53
            d["spec"]["tasks"][1]["replicas"] = replicas
            if plugins is not None:
                d["spec"]["plugins"] = plugins

        return mutate

    validate_job(modified(named(10)))  # aaa...-worker-9: 62 characters
    with pytest.raises(ValueError, match="would be 64 characters, over the 63 the hostname the svc plugin"):
        validate_job(modified(named(1000)))  # aaa...-worker-999
    with pytest.raises(ValueError, match="would be 64 characters"):
        validate_job(modified(named(1000, {"pytorch": ["--master=master"]})))  # svc comes with pytorch
    # Without it, Volcano's webhook checks the name with the task's position (aaa...-worker-1) and the pods run
    # under longer names; this was refused.
    validate_job(modified(named(1000, {})))
    with pytest.raises(ValueError, match=r"^pod name 'a{56}-master-0' would be 65 characters, over the 63 Volcano"):
        validate_job(modified(lambda d: (named(1, {})(d), d["metadata"].update(name="a" * 56))))


def test_generate_name_without_name_is_accepted() -> None:
    job = modified(lambda d: (d["metadata"].pop("name"), d["metadata"].update(generateName="ft-")))
    validate_job(job)


def test_a_task_without_a_name_is_named_as_volcanos_webhook_names_it() -> None:
    # mutate_job.go's mutateSpec: an unnamed task (absent or '') is `default<index>`; both were refused
    # ("field is required", "'' must be a lowercase RFC 1123 label").
    job = modified(lambda d: (d["spec"]["tasks"][1].pop("name"), d["spec"]["tasks"][1].pop("dependsOn")))
    filled = apply_volcano_defaults(job)
    assert [t.name for t in filled.spec.tasks] == ["master", "default1"]
    validate_job(filled)
    unnamed = modified(lambda d: d["spec"]["tasks"][0].update(name=""))
    with pytest.raises(ValueError, match=r"^spec\.tasks\[0\]\.name '' must be a lowercase RFC 1123 label"):
        validate_job(unnamed)  # as written; the webhook's defaults come first when a cluster admits it


def test_volcano_defaults_replace_zero_and_fill_gaps() -> None:
    job = modified(lambda d: (d["spec"].update(maxRetry=0), d["spec"].pop("minAvailable"), d["spec"].pop("queue")))
    filled = apply_volcano_defaults(job)
    assert filled.spec.max_retry == 3
    assert filled.spec.queue == "default"
    assert filled.spec.min_available == 3  # master minAvailable 1 + worker replicas 2
    assert filled.spec.tasks[1].min_available == 2
    assert "svc" in filled.spec.plugins
    assert job.spec.max_retry == 0, "the original is left alone"


# ---- Queue and PodGroup -------------------------------------------------------------------------------


def test_queue_round_trips_and_matches_its_crd(shared_dir: Path) -> None:
    queue = parse_queue(QUEUE_YAML)
    assert queue.to_dict() == yaml.safe_load(QUEUE_YAML)
    assert queue.spec.capability["nvidia.com/gpu"] == 8
    assert queue.status.state == "Open"
    assert queue.spec.affinity and queue.spec.affinity.node_group_affinity
    assert_valid(crd_validator(shared_dir, "scheduling.volcano.sh_queues.yaml"), queue.to_dict())
    validate_queue(queue)


def test_podgroup_round_trips_and_matches_its_crd(shared_dir: Path) -> None:
    group = parse_podgroup(PODGROUP_YAML)
    assert group.to_dict() == yaml.safe_load(PODGROUP_YAML)
    assert group.spec.min_task_member == {"master": 1, "worker": 2}
    assert group.status.phase == "Running"
    assert_valid(crd_validator(shared_dir, "scheduling.volcano.sh_podgroups.yaml"), group.to_dict())


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        (
            parse_queue,
            QUEUE_YAML.replace("weight: 4", "wieght: 4"),
            "unknown field spec.wieght (did you mean weight?)",
        ),
        (parse_queue, QUEUE_YAML.replace("weight: 4", "weight: -1"), "spec.weight: value must be at least 0"),
        (
            parse_queue,
            QUEUE_YAML.replace("state: Open", "state: Opened"),
            "status.state: 'Opened' is not allowed",
        ),
        # the API server refuses anything but a boolean; pydantic alone read "yes" and 1 as true
        (parse_queue, QUEUE_YAML.replace("reclaimable: true", 'reclaimable: "yes"'), "spec.reclaimable: expected true"),
        (parse_queue, QUEUE_YAML.replace("reclaimable: true", "reclaimable: 1"), "spec.reclaimable: expected true"),
        (parse_queue, QUEUE_YAML.replace("{resource:", "{resources:"), "unknown field spec.guarantee.resources"),
        # spec.affinity and spec.extendClusters as the CRD types them (they were free mappings and lists)
        (
            parse_queue,
            QUEUE_YAML.replace(
                "{nodeGroupAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [group-a]}}",
                "{nodeGroupAffinity: group-a}",
            ),
            "spec.affinity.nodeGroupAffinity: expected a mapping, got 'group-a'",
        ),
        (
            parse_queue,
            QUEUE_YAML.replace('capacity: {cpu: "8"}', "capacity: {cpu: lots}"),
            "spec.extendClusters[0].capacity.cpu: quantity 'lots'",
        ),
        (parse_podgroup, PODGROUP_YAML.replace("minMember", "minMembers"), "unknown field spec.minMembers"),
        (parse_podgroup, PODGROUP_YAML.replace("phase: Running", "phase: Done"), "status.phase: 'Done'"),
        (
            parse_podgroup,
            PODGROUP_YAML.replace("cpu: 9", "cpu: nine"),
            "spec.minResources.cpu: quantity 'nine'",
        ),
    ],
)
def test_queue_and_podgroup_typos_are_rejected(parse, text: str, expected: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse(text)
    assert str(caught.value).startswith(expected)
    assert "\n" not in str(caught.value)


def _queue(change: Any) -> Any:
    data = yaml.safe_load(QUEUE_YAML)
    change(data)
    return parse_queue(data)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # Volcano v1.15's validate_queue.go: ValidateResourceQuantityValue, then guarantee <= deserved <= capability
        (lambda q: q["spec"]["capability"].update(cpu="-1"), "spec.capability[cpu] is -1; it must be greater than"),
        (lambda q: q["spec"]["capability"].update(pods="1.5"), "spec.capability[pods] is 1.5; pods must be a whole"),
        (
            lambda q: q["spec"]["deserved"].update({"nvidia.com/gpu": 9}),
            "spec.deserved[nvidia.com/gpu] is 9; it must be at most spec.capability[nvidia.com/gpu] = 8",
        ),
        (
            lambda q: q["spec"]["guarantee"]["resource"].update({"nvidia.com/gpu": 5}),
            "spec.deserved[nvidia.com/gpu] is 4; it must be at least spec.guarantee.resource[nvidia.com/gpu] = 5",
        ),
        (
            lambda q: q["spec"]["guarantee"]["resource"].update(memory="1Gi"),
            "spec.guarantee.resource[memory] is 1Gi, so spec.deserved[memory] must be set",
        ),
        (lambda q: q["metadata"].update(name="GPU_queue"), "metadata.name 'GPU_queue' must be a lowercase RFC 1123"),
        (lambda q: q["spec"].update(parent="gpu-queue"), "queue 'gpu-queue' names itself as its spec.parent"),
        (
            lambda q: q["metadata"].update(
                annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1"}
            ),
            "metadata.annotations[volcano.sh/hierarchy] 'root/a' and [volcano.sh/hierarchy-weights] '1' must name",
        ),
        (
            lambda q: q["metadata"].update(
                annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/0"}
            ),
            "metadata.annotations[volcano.sh/hierarchy-weights] '1/0': each weight must be a number greater than 0",
        ),
    ],
)
def test_queue_admission_refuses_with_one_sentence(change: Any, expected: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_queue(_queue(change))
    assert str(caught.value).startswith(expected), caught.value
    assert "\n" not in str(caught.value)


def _tree_queue(name: str, parent: str | None = None, **capability: Any) -> Any:
    return parse_queue({"metadata": {"name": name}, "spec": {"parent": parent, "capability": capability or None}})


def test_a_queue_tree_is_held_to_the_webhooks_hierarchy_rules() -> None:
    # validateQueueDepth (5 under root), findNearestAncestorCapability, a parent's capability against its children
    chain = {f"q{i}": _tree_queue(f"q{i}", f"q{i - 1}" if i else "root") for i in range(5)}
    validate_queue_tree(_tree_queue("q5", "q3"), chain)  # q0..q3 above it: 5 deep
    with pytest.raises(ValueError, match=r"^it would sit more than 5 queues deep under root; Volcano allows 5$"):
        validate_queue_tree(_tree_queue("q5", "q4"), chain)
    with pytest.raises(ValueError, match=r"^its spec.parent 'org' does not exist; create that queue first$"):
        validate_queue_tree(_tree_queue("team", "org"), {})
    tree = {"org": _tree_queue("org", "root", cpu="8"), "mid": _tree_queue("mid", "org")}
    validate_queue_tree(_tree_queue("team", "mid", cpu="8"), tree)
    with pytest.raises(ValueError, match=r"^spec.capability\[cpu\] is 16, above the 8 of its ancestor queue 'org'$"):
        validate_queue_tree(_tree_queue("team", "mid", cpu="16"), tree)
    tree["team"] = _tree_queue("team", "org", cpu="6")
    with pytest.raises(ValueError, match=r"^spec.capability\[cpu\] is 4, below the 6 of its child queue 'team'$"):
        validate_queue_tree(_tree_queue("org", "root", cpu="4"), tree)


def test_a_queue_volcano_takes_passes() -> None:
    validate_queue(
        _queue(
            lambda q: q["metadata"].update(
                annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/2.5"}
            )
        )
    )
    validate_queue(_queue(lambda q: q["spec"].update(capability={"example.com/odd name": 1, "cpu": "500m"})))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "tasks", 0, "replicas"), 3_000_000_000),
        (("spec", "minAvailable"), 2**31),
        (("spec", "maxRetry"), 99999999999999999999),
        (("spec", "tasks", 0, "minAvailable"), 2**31),
        (("spec", "ttlSecondsAfterFinished"), 2**40),
    ],
)
def test_int32_fields_refuse_what_the_api_server_cannot_hold(path: tuple, value: int) -> None:
    # The CRD declares them `format: int32`: the API server refuses anything beyond (a typo, never a gang), and
    # LocalCluster, which once tried to hold 3,000,000,000 replicas in memory, refuses it the same way.
    manifest = vcjob("big", pods=2)
    target = manifest
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=f"value must be at most {2**31 - 1}"):
        parse_job(manifest)
    target[path[-1]] = 2**31 - 1 if path[-1] != "minAvailable" else 2
    parse_job(manifest)  # the largest int32 itself is accepted
