"""EU stall sampling through PTI's PC sampling API: collection, refusal and decoding into columns.

``StallSampler`` runs PTI's sequence (enable -> configure the period -> start/stop -> stall reasons,
profiled devices, observed kernels, per-kernel info and per-instruction samples -> disable). PTI
hands the data after collection stops, per kernel object and without timestamps. The instruction
arrays are read as numpy columns and the source info behind them in one C call
(``xpuprof._native.pcsample``); only the per-kernel calls are ctypes calls.

Where the machine cannot sample (PTI_ERROR_PC_SAMPLING_UNSUPPORTED and friends), ``enable`` raises
one ``StallSamplingError`` that says what the user can do: the null driver's test device, the
driver's paranoid setting, ZET_ENABLE_METRICS set too late, or a device without the
EuStallSampling metric group.

``stall_args`` and ``stall_metadata`` (``stall_emit.py``) turn ``StallResults`` into kernel args and
the trace's ``xpu_stall_sampling`` metadata.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...vendors import pti_pc_sampling as pcs
from ...vendors.levelzero import NULL_DEVICE_NAME
from ..base import BackendError

ZET_ENABLE_METRICS = "ZET_ENABLE_METRICS"


class StallSamplingError(BackendError):
    """EU stall sampling cannot run or failed; the message names the cause and what to do."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class StallResults:
    """What PTI sampled, as columns. Kernels: one row per kernel object PTI observed. Instructions:
    one row per sampled instruction, ``kernel`` indexing the kernel rows. Sample matrices have one
    column per stall reason, in ``reasons`` order."""

    reasons: list[str]
    descriptions: list[str]
    period_ns: int
    kernel_names: list[str]
    kernel_handles: np.ndarray  # uint64
    kernel_devices: np.ndarray  # uint64 device handle
    kernel_samples: np.ndarray  # (kernels, reasons) uint64
    instr_kernel: np.ndarray  # int64
    instr_offset: np.ndarray  # uint64
    instr_file: np.ndarray  # int32 index into files, -1 without source
    instr_line: np.ndarray  # int64, 0 without source
    instr_samples: np.ndarray  # (instructions, reasons) uint64
    files: list[str]
    devices: list[dict] = field(default_factory=list)  # handle, samples, pcs, samples_dropped
    warnings: list[str] = field(default_factory=list)

    @property
    def total_samples(self) -> int:
        return int(self.kernel_samples.sum())


def explain_refusal(code: int, name: str, *, device_names: list[str] | None = None,
                    environ=None, paranoid: dict[str, str] | None = None) -> str:
    """One message for a refused ``ptiPcSamplingEnable``: the cause this machine shows and what to do.
    (PTI logs its own reason on stderr from its logger, which a caller cannot intercept reliably.)"""
    env = os.environ if environ is None else environ
    head = f"EU stall sampling cannot run here: ptiPcSamplingEnable returned {name} ({code})"
    causes: list[str] = []
    if code == pcs.UNSUPPORTED:
        names = list(device_names or [])
        if env.get("ZE_ENABLE_NULL_DRIVER") == "1" or (names and all(n == NULL_DEVICE_NAME for n in names)):
            causes.append(f"the only Level Zero device is the null driver's test device ({NULL_DEVICE_NAME!r}, "
                          "ZE_ENABLE_NULL_DRIVER=1), which has no EU and no EuStallSampling metric group: run on an "
                          "Intel GPU (Data Center GPU Max, Arc B-series or newer) with its Level Zero driver (and, "
                          "for a non-root user, the driver's paranoid setting at 0: "
                          f"{' or '.join(pcs.PARANOID_FILES)})")
        else:
            advice = pcs.paranoid_advice(pcs.read_paranoid() if paranoid is None else paranoid)
            if advice:
                causes.append(advice)
            if env.get(ZET_ENABLE_METRICS) != "1":
                causes.append("ZET_ENABLE_METRICS=1 was not set before Level Zero initialized (PTI reads the "
                              "EuStallSampling metric group through the metrics API): start the process with it")
            causes.append("or the device or driver does not support EU stall sampling (Intel Data Center GPU Max "
                          "and later with a recent driver do): check `xpuprof devices`")
    else:
        causes.append(pcs.RESULT_HINTS.get(code, "PTI gave no further reason"))
    return head + ": " + "; ".join(causes) + ". PTI's log lines on stderr name the device it rejected"


class StallSampler:
    """One PTI PC-sampling collection. ``fns``: ``vendors.pti_pc_sampling.bind_functions`` of a loaded
    PTI (or test double); ``version``: its ``ptiVersionString`` (its struct layout must be known)."""

    def __init__(self, fns: dict, *, version: str, period_ns: int = 0,
                 result_name: Callable[[int], str] = lambda code: f"PTI result {code}",
                 device_names: list[str] | None = None) -> None:
        missing = [n for n in pcs.REQUIRED if fns.get(n) is None]
        if missing:
            raise StallSamplingError(f"the loaded PTI {version} has no EU stall sampling API (missing "
                                     f"{', '.join(missing)}); intel-pti 1.2 provides it")
        try:
            self.layout = pcs.layout_for(version)
        except pcs.PcSamplingLayoutError as exc:
            raise StallSamplingError(str(exc)) from None
        if period_ns < 0 or period_ns > 0xFFFFFFFF:
            raise StallSamplingError(f"stall_sampling_period_ns must be between 0 (PTI's default, "
                                     f"{pcs.PTI_PC_SAMPLING_DEFAULT_PERIOD_NS} ns) and {0xFFFFFFFF}, got {period_ns}")
        self.fns = fns
        self.version = version
        self.period_ns = int(period_ns)
        self.result_name = result_name
        self.device_names = list(device_names or [])
        self.handle = ctypes.c_void_p()
        self.enabled = self.started = self.stopped = False

    def _call(self, func: str, *args) -> int:
        return int(self.fns[func](*args))

    def _check(self, func: str, code: int) -> None:
        if code != pcs.SUCCESS:
            hint = pcs.RESULT_HINTS.get(code)
            raise StallSamplingError(f"{func} failed: {self.result_name(code)} ({code})"
                                     + (f": {hint}" if hint else ""), code)

    # ------------------------------------------------------------------ life cycle
    def enable(self) -> None:
        """Create the collection and set its period; a machine that cannot sample raises here."""
        code = self._call("ptiPcSamplingEnable", ctypes.byref(self.handle))
        if code != pcs.SUCCESS:
            raise StallSamplingError(explain_refusal(code, self.result_name(code), device_names=self.device_names),
                                     code)
        self.enabled = True
        try:
            self._check("ptiPcSamplingConfigure",
                        self._call("ptiPcSamplingConfigure", self.handle, None, 0, self.period_ns))
        except BaseException:
            self.disable()
            raise

    def start(self) -> None:
        self._check("ptiPcSamplingStartCollection", self._call("ptiPcSamplingStartCollection", self.handle))
        self.started = True

    def stop(self) -> None:
        if self.started and not self.stopped:
            self.stopped = True
            self._check("ptiPcSamplingStopCollection", self._call("ptiPcSamplingStopCollection", self.handle))

    def disable(self) -> None:
        if self.enabled:
            self.enabled = False
            self._call("ptiPcSamplingDisable", self.handle)

    # ------------------------------------------------------------------ data
    def reasons(self) -> tuple[list[str], list[str]]:
        n = pcs.sz(0)
        self._check("ptiPcSamplingGetStallReasons", self._call("ptiPcSamplingGetStallReasons", self.handle, None,
                                                               ctypes.byref(n)))
        arr = (pcs.StallReasonInfo * max(n.value, 1))()
        for r in arr:
            r._struct_size = self.layout["stall_reason_info"]
        self._check("ptiPcSamplingGetStallReasons", self._call("ptiPcSamplingGetStallReasons", self.handle, arr,
                                                               ctypes.byref(n)))
        names = [(arr[i]._name or b"").decode("utf-8", "replace") for i in range(n.value)]
        descs = [(arr[i]._description or b"").decode("utf-8", "replace") for i in range(n.value)]
        return names, descs

    def _devices(self) -> list[int]:
        n = pcs.sz(0)
        fn = "ptiPcSamplingGetProfiledDevices"
        self._check(fn, self._call(fn, self.handle, None, ctypes.byref(n)))
        arr = (ctypes.c_void_p * max(n.value, 1))()
        self._check(fn, self._call(fn, self.handle, arr, ctypes.byref(n)))
        return [int(arr[i] or 0) for i in range(n.value)]

    def _device_status(self, device: int) -> dict:
        out = {"handle": f"0x{device:x}"}
        fn = self.fns.get("ptiPcSamplingGetDeviceStatus")
        if fn is None:
            return out
        st = pcs.DeviceStatus()
        st._struct_size = self.layout["device_status"]
        if int(fn(self.handle, ctypes.c_void_p(device), ctypes.byref(st))) == pcs.SUCCESS:
            out.update(samples=int(st._total_sample_count), pcs=int(st._total_pc_count),
                       samples_dropped=bool(st._samples_dropped))
        return out

    def _kernel_handles(self, device: int) -> np.ndarray:
        n = pcs.sz(0)
        fn = "ptiPcSamplingGetObservedKernelHandles"
        self._check(fn, self._call(fn, self.handle, ctypes.c_void_p(device), None, ctypes.byref(n)))
        out = np.zeros(max(n.value, 1), np.uint64)
        self._check(fn, self._call(fn, self.handle, ctypes.c_void_p(device),
                                   out.ctypes.data_as(ctypes.POINTER(pcs.u64)), ctypes.byref(n)))
        return out[:n.value]

    def _kernel_info(self, device: int, kh: int, info, aggregated: np.ndarray, nreasons: int) -> tuple[str, int]:
        """(name, instructions with samples) of one observed kernel; its totals by reason into ``aggregated``."""
        ctypes.memset(ctypes.byref(info), 0, ctypes.sizeof(info))
        info._struct_size = self.layout["kernel_info"]
        info._aggregated_samples = ctypes.cast(aggregated.ctypes.data, ctypes.POINTER(pcs.u64))
        fn = "ptiPcSamplingGetObservedKernelInfo"
        self._check(fn, self._call(fn, self.handle, ctypes.c_void_p(device), kh, ctypes.byref(info)))
        try:
            pcs.check_struct_size("kernel_info", info._struct_size)
        except pcs.PcSamplingLayoutError as exc:
            raise StallSamplingError(str(exc)) from None
        if int(info._reason_count) != nreasons:
            raise StallSamplingError(f"PTI reported {int(info._reason_count)} stall reasons for a kernel but "
                                     f"{nreasons} for the collection; the samples cannot be attributed")
        return (info._kernel_name or b"").decode("utf-8", "replace"), int(info._instructions_with_samples_count)

    def collect(self) -> StallResults:
        """Everything PTI sampled, after ``stop``: the kernels' infos first (their instruction counts), then
        every kernel's instructions and samples straight into one preallocated array each."""
        from ... import _native

        pcsample = _native.load("pcsample", "EU stall sampling")  # checked when the session started

        names, descs = self.reasons()
        nreasons = len(names)
        devices, warnings, observed = [], [], []
        for device in self._devices():
            status = self._device_status(device)
            devices.append(status)
            if status.get("samples_dropped"):
                warnings.append(f"PTI dropped EU stall samples on device {status['handle']} (its buffer filled): "
                                "the shares are from the samples kept; a longer sampling period drops fewer")
            observed += [(device, kh) for kh in self._kernel_handles(device).tolist()]
        nk = len(observed)
        kernel_samples = np.zeros((nk, max(nreasons, 1)), np.uint64)
        counts = np.zeros(nk, np.int64)
        k_names: list[str] = []
        info = pcs.KernelInfo()
        for k, (device, kh) in enumerate(observed):
            name, counts[k] = self._kernel_info(device, kh, info, kernel_samples[k], nreasons)
            k_names.append(name)
        total = int(counts.sum())
        instr = np.zeros((total, 2), np.uint64)  # pti_pc_sampling_instruction_t: offset, source_info*
        samples = np.zeros((total, max(nreasons, 1)), np.uint64)
        at = 0
        fn = "ptiPcSamplingGetSamplesPerInstruction"
        for k, (device, kh) in enumerate(observed):
            n = int(counts[k])
            if n:
                self._check(fn, self._call(fn, self.handle, ctypes.c_void_p(device), kh, instr[at].ctypes.data, n,
                                           samples[at].ctypes.data, n * nreasons))
            at += n
        file_ptrs, lines = pcsample.source_info(instr[:, 1].tobytes())
        files, file_index = _strings_by_pointer(np.frombuffer(file_ptrs, np.uint64))
        return StallResults(
            reasons=names, descriptions=descs,
            period_ns=self.period_ns or pcs.PTI_PC_SAMPLING_DEFAULT_PERIOD_NS,
            kernel_names=k_names, kernel_handles=np.array([kh for _d, kh in observed], np.uint64),
            kernel_devices=np.array([d for d, _kh in observed], np.uint64),
            kernel_samples=kernel_samples[:, :nreasons], instr_kernel=np.repeat(np.arange(nk, dtype=np.int64), counts),
            instr_offset=np.ascontiguousarray(instr[:, 0]), instr_file=file_index,
            instr_line=np.frombuffer(lines, np.uint64).astype(np.int64), instr_samples=samples[:, :nreasons],
            files=files, devices=devices, warnings=warnings)


def _strings_by_pointer(ptrs: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(distinct non-NULL strings, index per pointer with -1 for NULL): one read per distinct pointer."""
    if not len(ptrs):
        return [], np.zeros(0, np.int32)
    uniq, inverse = np.unique(ptrs, return_inverse=True)
    texts = [ctypes.string_at(int(p)).decode("utf-8", "replace") if p else None for p in uniq.tolist()]
    # distinct pointers may hold equal text: one file index per text
    table: dict[str, int] = {}
    index_of_uniq = np.array([-1 if t is None else table.setdefault(t, len(table)) for t in texts], np.int32)
    return list(table), index_of_uniq[inverse.reshape(-1)]
