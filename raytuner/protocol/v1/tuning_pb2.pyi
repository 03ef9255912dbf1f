from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateSessionRequest(_message.Message):
    __slots__ = ("problem_json", "engine", "options_json", "tasks_json", "seed", "max_evaluations", "lease_seconds")
    PROBLEM_JSON_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    TASKS_JSON_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    problem_json: str
    engine: str
    options_json: str
    tasks_json: str
    seed: int
    max_evaluations: int
    lease_seconds: float
    def __init__(self, problem_json: _Optional[str] = ..., engine: _Optional[str] = ..., options_json: _Optional[str] = ..., tasks_json: _Optional[str] = ..., seed: _Optional[int] = ..., max_evaluations: _Optional[int] = ..., lease_seconds: _Optional[float] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "problem_name", "engine", "tasks_json", "evaluations", "failed", "pending", "finished", "best", "created", "options_json", "max_evaluations", "outputs", "goals", "lease_seconds")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_NAME_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    TASKS_JSON_FIELD_NUMBER: _ClassVar[int]
    EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    BEST_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    MAX_EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    GOALS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    problem_name: str
    engine: str
    tasks_json: str
    evaluations: int
    failed: int
    pending: int
    finished: bool
    best: _containers.RepeatedCompositeFieldContainer[BestConfiguration]
    created: float
    options_json: str
    max_evaluations: int
    outputs: _containers.RepeatedScalarFieldContainer[str]
    goals: _containers.RepeatedScalarFieldContainer[str]
    lease_seconds: float
    def __init__(self, session_id: _Optional[str] = ..., problem_name: _Optional[str] = ..., engine: _Optional[str] = ..., tasks_json: _Optional[str] = ..., evaluations: _Optional[int] = ..., failed: _Optional[int] = ..., pending: _Optional[int] = ..., finished: _Optional[bool] = ..., best: _Optional[_Iterable[_Union[BestConfiguration, _Mapping]]] = ..., created: _Optional[float] = ..., options_json: _Optional[str] = ..., max_evaluations: _Optional[int] = ..., outputs: _Optional[_Iterable[str]] = ..., goals: _Optional[_Iterable[str]] = ..., lease_seconds: _Optional[float] = ...) -> None: ...

class BestConfiguration(_message.Message):
    __slots__ = ("task_json", "config_json", "outputs", "uid")
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    task_json: str
    config_json: str
    outputs: _containers.ScalarMap[str, float]
    uid: str
    def __init__(self, task_json: _Optional[str] = ..., config_json: _Optional[str] = ..., outputs: _Optional[_Mapping[str, float]] = ..., uid: _Optional[str] = ...) -> None: ...

class AskRequest(_message.Message):
    __slots__ = ("session_id", "task_json", "trial_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    task_json: str
    trial_id: str
    def __init__(self, session_id: _Optional[str] = ..., task_json: _Optional[str] = ..., trial_id: _Optional[str] = ...) -> None: ...

class AskResponse(_message.Message):
    __slots__ = ("status", "trial_id", "task_json", "config_json", "fidelity", "lease_seconds")
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATUS_UNSPECIFIED: _ClassVar[AskResponse.Status]
        TRIAL: _ClassVar[AskResponse.Status]
        WAIT: _ClassVar[AskResponse.Status]
        FINISHED: _ClassVar[AskResponse.Status]
    STATUS_UNSPECIFIED: AskResponse.Status
    TRIAL: AskResponse.Status
    WAIT: AskResponse.Status
    FINISHED: AskResponse.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    FIDELITY_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    status: AskResponse.Status
    trial_id: str
    task_json: str
    config_json: str
    fidelity: float
    lease_seconds: float
    def __init__(self, status: _Optional[_Union[AskResponse.Status, str]] = ..., trial_id: _Optional[str] = ..., task_json: _Optional[str] = ..., config_json: _Optional[str] = ..., fidelity: _Optional[float] = ..., lease_seconds: _Optional[float] = ...) -> None: ...

class TellRequest(_message.Message):
    __slots__ = ("session_id", "trial_id", "outputs", "failure", "machine_json", "software_json", "additional_output_json")
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    MACHINE_JSON_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_JSON_FIELD_NUMBER: _ClassVar[int]
    ADDITIONAL_OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    trial_id: str
    outputs: _containers.ScalarMap[str, float]
    failure: str
    machine_json: str
    software_json: str
    additional_output_json: str
    def __init__(self, session_id: _Optional[str] = ..., trial_id: _Optional[str] = ..., outputs: _Optional[_Mapping[str, float]] = ..., failure: _Optional[str] = ..., machine_json: _Optional[str] = ..., software_json: _Optional[str] = ..., additional_output_json: _Optional[str] = ...) -> None: ...

class TellResponse(_message.Message):
    __slots__ = ("uid", "duplicate", "failed")
    UID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    uid: str
    duplicate: bool
    failed: bool
    def __init__(self, uid: _Optional[str] = ..., duplicate: _Optional[bool] = ..., failed: _Optional[bool] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("problem_name",)
    PROBLEM_NAME_FIELD_NUMBER: _ClassVar[int]
    problem_name: str
    def __init__(self, problem_name: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ...) -> None: ...

class WatchSessionRequest(_message.Message):
    __slots__ = ("session_id", "from_start")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_START_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    from_start: bool
    def __init__(self, session_id: _Optional[str] = ..., from_start: _Optional[bool] = ...) -> None: ...

class SessionEvent(_message.Message):
    __slots__ = ("kind", "trial_id", "task_json", "config_json", "outputs", "failure", "time", "sequence")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[SessionEvent.Kind]
        ASKED: _ClassVar[SessionEvent.Kind]
        TOLD: _ClassVar[SessionEvent.Kind]
        FINISHED: _ClassVar[SessionEvent.Kind]
        EXPIRED: _ClassVar[SessionEvent.Kind]
    KIND_UNSPECIFIED: SessionEvent.Kind
    ASKED: SessionEvent.Kind
    TOLD: SessionEvent.Kind
    FINISHED: SessionEvent.Kind
    EXPIRED: SessionEvent.Kind
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    kind: SessionEvent.Kind
    trial_id: str
    task_json: str
    config_json: str
    outputs: _containers.ScalarMap[str, float]
    failure: str
    time: float
    sequence: int
    def __init__(self, kind: _Optional[_Union[SessionEvent.Kind, str]] = ..., trial_id: _Optional[str] = ..., task_json: _Optional[str] = ..., config_json: _Optional[str] = ..., outputs: _Optional[_Mapping[str, float]] = ..., failure: _Optional[str] = ..., time: _Optional[float] = ..., sequence: _Optional[int] = ...) -> None: ...

class UploadEvaluationsRequest(_message.Message):
    __slots__ = ("problem_name", "records_json")
    PROBLEM_NAME_FIELD_NUMBER: _ClassVar[int]
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    problem_name: str
    records_json: str
    def __init__(self, problem_name: _Optional[str] = ..., records_json: _Optional[str] = ...) -> None: ...

class UploadEvaluationsResponse(_message.Message):
    __slots__ = ("received",)
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    received: int
    def __init__(self, received: _Optional[int] = ...) -> None: ...

class QueryEvaluationsRequest(_message.Message):
    __slots__ = ("problem_name", "query_json")
    PROBLEM_NAME_FIELD_NUMBER: _ClassVar[int]
    QUERY_JSON_FIELD_NUMBER: _ClassVar[int]
    problem_name: str
    query_json: str
    def __init__(self, problem_name: _Optional[str] = ..., query_json: _Optional[str] = ...) -> None: ...

class QueryEvaluationsResponse(_message.Message):
    __slots__ = ("records_json",)
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    records_json: str
    def __init__(self, records_json: _Optional[str] = ...) -> None: ...

class GrantAccessRequest(_message.Message):
    __slots__ = ("problem_name", "grantee", "revoke")
    PROBLEM_NAME_FIELD_NUMBER: _ClassVar[int]
    GRANTEE_FIELD_NUMBER: _ClassVar[int]
    REVOKE_FIELD_NUMBER: _ClassVar[int]
    problem_name: str
    grantee: str
    revoke: bool
    def __init__(self, problem_name: _Optional[str] = ..., grantee: _Optional[str] = ..., revoke: _Optional[bool] = ...) -> None: ...

class GrantAccessResponse(_message.Message):
    __slots__ = ("grantees",)
    GRANTEES_FIELD_NUMBER: _ClassVar[int]
    grantees: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, grantees: _Optional[_Iterable[str]] = ...) -> None: ...

class CrowdQuery(_message.Message):
    __slots__ = ("tuning_problem_name", "problem_space_json", "configuration_space_json", "limit")
    TUNING_PROBLEM_NAME_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_SPACE_JSON_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_SPACE_JSON_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    tuning_problem_name: str
    problem_space_json: str
    configuration_space_json: str
    limit: int
    def __init__(self, tuning_problem_name: _Optional[str] = ..., problem_space_json: _Optional[str] = ..., configuration_space_json: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class CrowdUploadRequest(_message.Message):
    __slots__ = ("tuning_problem_name", "records_json", "kind", "access", "shared_with_users", "shared_with_groups")
    TUNING_PROBLEM_NAME_FIELD_NUMBER: _ClassVar[int]
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    SHARED_WITH_USERS_FIELD_NUMBER: _ClassVar[int]
    SHARED_WITH_GROUPS_FIELD_NUMBER: _ClassVar[int]
    tuning_problem_name: str
    records_json: str
    kind: str
    access: str
    shared_with_users: _containers.RepeatedScalarFieldContainer[str]
    shared_with_groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tuning_problem_name: _Optional[str] = ..., records_json: _Optional[str] = ..., kind: _Optional[str] = ..., access: _Optional[str] = ..., shared_with_users: _Optional[_Iterable[str]] = ..., shared_with_groups: _Optional[_Iterable[str]] = ...) -> None: ...

class CrowdUploadResponse(_message.Message):
    __slots__ = ("added", "duplicates")
    ADDED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    added: int
    duplicates: int
    def __init__(self, added: _Optional[int] = ..., duplicates: _Optional[int] = ...) -> None: ...

class CrowdRecords(_message.Message):
    __slots__ = ("records_json",)
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    records_json: str
    def __init__(self, records_json: _Optional[str] = ...) -> None: ...

class CrowdPredictRequest(_message.Message):
    __slots__ = ("query", "objective", "task_json", "parameters_json", "modeler")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    MODELER_FIELD_NUMBER: _ClassVar[int]
    query: CrowdQuery
    objective: str
    task_json: str
    parameters_json: str
    modeler: str
    def __init__(self, query: _Optional[_Union[CrowdQuery, _Mapping]] = ..., objective: _Optional[str] = ..., task_json: _Optional[str] = ..., parameters_json: _Optional[str] = ..., modeler: _Optional[str] = ...) -> None: ...

class CrowdPredictResponse(_message.Message):
    __slots__ = ("predictions_json", "evaluations")
    PREDICTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    predictions_json: str
    evaluations: int
    def __init__(self, predictions_json: _Optional[str] = ..., evaluations: _Optional[int] = ...) -> None: ...

class CrowdSensitivityRequest(_message.Message):
    __slots__ = ("query", "objective", "task_json", "method", "num_samples", "second_order", "seed", "modeler")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    TASK_JSON_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    SECOND_ORDER_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MODELER_FIELD_NUMBER: _ClassVar[int]
    query: CrowdQuery
    objective: str
    task_json: str
    method: str
    num_samples: int
    second_order: bool
    seed: int
    modeler: str
    def __init__(self, query: _Optional[_Union[CrowdQuery, _Mapping]] = ..., objective: _Optional[str] = ..., task_json: _Optional[str] = ..., method: _Optional[str] = ..., num_samples: _Optional[int] = ..., second_order: _Optional[bool] = ..., seed: _Optional[int] = ..., modeler: _Optional[str] = ...) -> None: ...

class CrowdSensitivityResponse(_message.Message):
    __slots__ = ("result_json", "evaluations")
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    result_json: str
    evaluations: int
    def __init__(self, result_json: _Optional[str] = ..., evaluations: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("session_id", "trial_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    trial_id: str
    def __init__(self, session_id: _Optional[str] = ..., trial_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("status", "lease_ends", "lease_seconds")
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        STATUS_UNSPECIFIED: _ClassVar[HeartbeatResponse.Status]
        LEASED: _ClassVar[HeartbeatResponse.Status]
        TOLD: _ClassVar[HeartbeatResponse.Status]
        EXPIRED: _ClassVar[HeartbeatResponse.Status]
    STATUS_UNSPECIFIED: HeartbeatResponse.Status
    LEASED: HeartbeatResponse.Status
    TOLD: HeartbeatResponse.Status
    EXPIRED: HeartbeatResponse.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEASE_ENDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    status: HeartbeatResponse.Status
    lease_ends: float
    lease_seconds: float
    def __init__(self, status: _Optional[_Union[HeartbeatResponse.Status, str]] = ..., lease_ends: _Optional[float] = ..., lease_seconds: _Optional[float] = ...) -> None: ...
