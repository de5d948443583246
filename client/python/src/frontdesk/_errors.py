"""FrontdeskError: a gRPC status with its google.rpc details decoded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import grpc
from google.rpc import error_details_pb2, status_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True)
class FieldViolation:
    """One google.rpc.BadRequest field violation: which request field, and why."""

    field: str
    description: str


class FrontdeskError(Exception):
    """A failed Frontdesk call.

    ``code`` is the gRPC status code; ``reason`` the stable ErrorInfo reason (such as
    ``"NOT_FOUND"``, ``"INVALID_ARGUMENT"``, ``"THREAD_BUSY"``, ``"WRONG_RESPONDER"``,
    ``"CONVERSATION_ENDED"``: a message to a service call that was hung up, or the API key
    refusals ``"UNAUTHENTICATED"``, ``"SCOPE_MISSING"`` and ``"QUOTA_EXCEEDED"``),
    ``None`` when the server sent none; ``domain`` the ErrorInfo domain (``"frontdesk.dev"``);
    ``error_metadata`` the ErrorInfo metadata (such as ``kind`` and ``id`` of what was not
    found, ``field``, the ``scope`` a key lacks or the ``quota`` a tenant is over);
    ``retry_delay`` the google.rpc.RetryInfo delay in seconds, sent where retrying may help
    (``THREAD_BUSY``, ``CHECKPOINT_CONFLICT``, ``MODEL_UNAVAILABLE``, ``QUOTA_EXCEEDED``, ...),
    ``None`` otherwise; ``field_violations`` the BadRequest violations of an INVALID_ARGUMENT;
    ``details`` every decoded detail message (unknown ones as ``google.protobuf.Any``).
    ``retryable`` tells whether the client retries such an error for a call with an
    idempotency key (UNAVAILABLE or ABORTED).
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: Optional[str] = None,
        domain: Optional[str] = None,
        error_metadata: Optional[Dict[str, str]] = None,
        field_violations: Optional[List[FieldViolation]] = None,
        details: Optional[List[Any]] = None,
        retry_delay: Optional[float] = None,
    ) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.reason = reason
        self.domain = domain
        self.error_metadata: Dict[str, str] = dict(error_metadata or {})
        self.field_violations: List[FieldViolation] = list(field_violations or [])
        self.details: List[Any] = list(details or [])
        self.retry_delay: Optional[float] = retry_delay

    @property
    def retryable(self) -> bool:
        """True for UNAVAILABLE and ABORTED: a call with an idempotency key is retried."""
        return self.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED)

    def __str__(self) -> str:
        text = f"{self.code.name}: {self.message}"
        if self.reason:
            text += f" (reason {self.reason})"
        if self.retry_delay is not None:
            text += f" (retry after {self.retry_delay:g}s)"
        for v in self.field_violations:
            text += f"; {v.field}: {v.description}"
        return text

    def __repr__(self) -> str:
        return f"FrontdeskError({self})"

    def __reduce__(self) -> Any:
        return (
            type(self),
            (
                self.code,
                self.message,
                self.reason,
                self.domain,
                self.error_metadata,
                self.field_violations,
                [],  # detail messages are not kept when pickled
                self.retry_delay,
            ),
        )

    @classmethod
    def cancelled_by_caller(cls) -> "FrontdeskError":
        """What a stream raises once its ``cancel()`` was called."""
        return cls(grpc.StatusCode.CANCELLED, "cancelled by the caller")

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "FrontdeskError":
        """Builds the error from a grpc (sync or asyncio) RpcError, decoding the
        google.rpc.Status that the server puts in the grpc-status-details-bin trailer."""
        code = _call(error, "code") or grpc.StatusCode.UNKNOWN
        message = _call(error, "details") or ""
        trailers = _call(error, "trailing_metadata") or ()
        return cls.from_status(code, message, trailers)

    @classmethod
    def from_status(
        cls,
        code: grpc.StatusCode,
        message: str,
        trailers: Sequence[Tuple[str, Any]] = (),
    ) -> "FrontdeskError":
        err = cls(code=code, message=message)
        raw = None
        for key, value in trailers:
            if key == STATUS_DETAILS_KEY:
                raw = value
        if raw is None:
            return err
        try:
            status = status_pb2.Status.FromString(bytes(raw))
        except Exception:  # a malformed trailer must not hide the real error
            return err
        if status.message and not err.message:
            err.message = status.message
        for any_msg in status.details:
            if any_msg.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                any_msg.Unpack(info)
                err.reason = info.reason or None
                err.domain = info.domain or None
                err.error_metadata = dict(info.metadata)
                err.details.append(info)
            elif any_msg.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                retry = error_details_pb2.RetryInfo()
                any_msg.Unpack(retry)
                err.retry_delay = retry.retry_delay.ToTimedelta().total_seconds()
                err.details.append(retry)
            elif any_msg.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                any_msg.Unpack(bad)
                err.field_violations.extend(
                    FieldViolation(v.field, v.description) for v in bad.field_violations
                )
                err.details.append(bad)
            else:
                err.details.append(any_msg)
        return err


def _call(error: Any, name: str) -> Any:
    fn = getattr(error, name, None)
    if fn is None:
        return None
    try:
        return fn()
    except Exception:
        return None
