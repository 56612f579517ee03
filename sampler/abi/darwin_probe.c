/*
 * What Apple's headers say about every struct, field, constant, count and
 * name memqual's macOS code relies on, as plain numbers and strings.
 *
 * Compiled, never run: `zig cc -target aarch64-macos -S` turns each global
 * below into one `.quad` (a number) or `.quad <string label>` (a string)
 * in the assembly, which `.ci/macos-check facts` writes to
 * darwin-facts.txt. A C `__` in a global's name is a `.` in the fact's name.
 * sampler/src/darwin_abi.rs compares the Rust side with that file when the
 * sampler is built for macOS, and fails the build naming any fact that
 * differs, that the Rust side does not check, or that it checks but this
 * file does not state. Add a fact here and on the Rust side together.
 *
 * Not stated by these headers (so not here): the libnotify API (notify.h is
 * not among the headers zig ships), the value of
 * kOSThermalNotificationPressureLevelName (an extern variable), and the
 * sysctl kern.memorystatus_vm_pressure_level (registered at run time).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <dispatch/dispatch.h>
#include <libkern/OSThermalNotification.h>
#include <libproc.h>
#include <mach/mach.h>
#include <sys/resource.h>
#include <sys/sysctl.h>
#include <sys/time.h>

#define NUMBER(name, value) const unsigned long long memqual_fact_##name = (value);

/* Offset, size and signedness of one field of a struct. */
#define FIELD(tag, type, field)                                                  \
  NUMBER(tag##__##field##__offset, offsetof(type, field))                        \
  NUMBER(tag##__##field##__size, sizeof(((type *)0)->field))                     \
  NUMBER(tag##__##field##__signed, (__typeof__(((type *)0)->field))0 - 1 < 1 - 1)

/* A sysctl name, from the headers' name tables: TOP.SECOND. */
#define SYSCTL(name, top, second_table, second)                                  \
  static const struct ctlname memqual_table_##name[] = second_table;             \
  const char *const memqual_text_sysctl__##name[2] = {                           \
      memqual_top_names[top].ctl_name, memqual_table_##name[second].ctl_name};

static const struct ctlname memqual_top_names[] = CTL_NAMES;

/* Scalar types in the system calls' signatures and the structs. */
NUMBER(type__natural_t__size, sizeof(natural_t))
NUMBER(type__integer_t__size, sizeof(integer_t))
NUMBER(type__mach_msg_type_number_t__size, sizeof(mach_msg_type_number_t))
NUMBER(type__kern_return_t__size, sizeof(kern_return_t))
NUMBER(type__mach_port_t__size, sizeof(mach_port_t))
NUMBER(type__vm_size_t__size, sizeof(vm_size_t))

/* task_info(TASK_VM_INFO): mach/task_info.h */
NUMBER(const__TASK_VM_INFO, TASK_VM_INFO)
NUMBER(const__TASK_VM_INFO_COUNT, TASK_VM_INFO_COUNT)
NUMBER(const__TASK_VM_INFO_REV0_COUNT, TASK_VM_INFO_REV0_COUNT)
NUMBER(const__TASK_VM_INFO_REV1_COUNT, TASK_VM_INFO_REV1_COUNT)
NUMBER(const__TASK_VM_INFO_REV2_COUNT, TASK_VM_INFO_REV2_COUNT)
NUMBER(const__TASK_VM_INFO_REV3_COUNT, TASK_VM_INFO_REV3_COUNT)
NUMBER(const__TASK_VM_INFO_REV4_COUNT, TASK_VM_INFO_REV4_COUNT)
NUMBER(const__TASK_VM_INFO_REV5_COUNT, TASK_VM_INFO_REV5_COUNT)
NUMBER(const__TASK_VM_INFO_REV6_COUNT, TASK_VM_INFO_REV6_COUNT)
NUMBER(const__TASK_VM_INFO_REV7_COUNT, TASK_VM_INFO_REV7_COUNT)
NUMBER(task_vm_info__size, sizeof(task_vm_info_data_t))
FIELD(task_vm_info, task_vm_info_data_t, virtual_size)
FIELD(task_vm_info, task_vm_info_data_t, resident_size)
FIELD(task_vm_info, task_vm_info_data_t, resident_size_peak)
FIELD(task_vm_info, task_vm_info_data_t, compressed)
FIELD(task_vm_info, task_vm_info_data_t, phys_footprint)
FIELD(task_vm_info, task_vm_info_data_t, ledger_phys_footprint_peak)
NUMBER(const__KERN_SUCCESS, KERN_SUCCESS)

/* proc_pid_rusage(RUSAGE_INFO_V4): libproc.h, sys/resource.h */
NUMBER(const__RUSAGE_INFO_V4, RUSAGE_INFO_V4)
NUMBER(rusage_info_v4__size, sizeof(struct rusage_info_v4))
FIELD(rusage_info_v4, struct rusage_info_v4, ri_wired_size)
FIELD(rusage_info_v4, struct rusage_info_v4, ri_resident_size)
FIELD(rusage_info_v4, struct rusage_info_v4, ri_phys_footprint)
FIELD(rusage_info_v4, struct rusage_info_v4, ri_lifetime_max_phys_footprint)
NUMBER(const__ESRCH, ESRCH)

/* host_statistics64(HOST_VM_INFO64): mach/host_info.h, mach/vm_statistics.h */
NUMBER(const__HOST_VM_INFO64, HOST_VM_INFO64)
NUMBER(const__HOST_VM_INFO64_COUNT, HOST_VM_INFO64_COUNT)
NUMBER(const__HOST_VM_INFO64_REV0_COUNT, HOST_VM_INFO64_REV0_COUNT)
NUMBER(const__HOST_VM_INFO64_REV1_COUNT, HOST_VM_INFO64_REV1_COUNT)
NUMBER(const__HOST_VM_INFO64_REV2_COUNT, HOST_VM_INFO64_REV2_COUNT)
NUMBER(vm_statistics64__size, sizeof(vm_statistics64_data_t))
FIELD(vm_statistics64, vm_statistics64_data_t, free_count)
FIELD(vm_statistics64, vm_statistics64_data_t, wire_count)
FIELD(vm_statistics64, vm_statistics64_data_t, pageins)
FIELD(vm_statistics64, vm_statistics64_data_t, pageouts)
FIELD(vm_statistics64, vm_statistics64_data_t, speculative_count)
FIELD(vm_statistics64, vm_statistics64_data_t, swapins)
FIELD(vm_statistics64, vm_statistics64_data_t, swapouts)
FIELD(vm_statistics64, vm_statistics64_data_t, compressor_page_count)
FIELD(vm_statistics64, vm_statistics64_data_t, total_uncompressed_pages_in_compressor)

/* sysctls: sys/sysctl.h (names and struct xsw_usage), sys/time.h */
SYSCTL(hw_memsize, CTL_HW, CTL_HW_NAMES, HW_MEMSIZE)
NUMBER(sysctl__hw_memsize__size, sizeof(uint64_t) * (memqual_table_hw_memsize[HW_MEMSIZE].ctl_type == CTLTYPE_QUAD))
SYSCTL(hw_model, CTL_HW, CTL_HW_NAMES, HW_MODEL)
SYSCTL(kern_boottime, CTL_KERN, CTL_KERN_NAMES, KERN_BOOTTIME)
SYSCTL(vm_swapusage, CTL_VM, CTL_VM_NAMES, VM_SWAPUSAGE)
NUMBER(xsw_usage__size, sizeof(struct xsw_usage))
FIELD(xsw_usage, struct xsw_usage, xsu_total)
FIELD(xsw_usage, struct xsw_usage, xsu_avail)
FIELD(xsw_usage, struct xsw_usage, xsu_used)
FIELD(xsw_usage, struct xsw_usage, xsu_pagesize)
FIELD(xsw_usage, struct xsw_usage, xsu_encrypted)
NUMBER(timeval__size, sizeof(struct timeval))
FIELD(timeval, struct timeval, tv_sec)

/* The values kern.memorystatus_vm_pressure_level reports are the kernel's
 * NOTE_MEMORYSTATUS_PRESSURE_* levels, public as dispatch's. */
NUMBER(const__DISPATCH_MEMORYPRESSURE_NORMAL, DISPATCH_MEMORYPRESSURE_NORMAL)
NUMBER(const__DISPATCH_MEMORYPRESSURE_WARN, DISPATCH_MEMORYPRESSURE_WARN)
NUMBER(const__DISPATCH_MEMORYPRESSURE_CRITICAL, DISPATCH_MEMORYPRESSURE_CRITICAL)

/* The thermal pressure level published through notify(3), macOS numbering:
 * libkern/OSThermalNotification.h */
NUMBER(const__kOSThermalPressureLevelNominal, kOSThermalPressureLevelNominal)
NUMBER(const__kOSThermalPressureLevelModerate, kOSThermalPressureLevelModerate)
NUMBER(const__kOSThermalPressureLevelHeavy, kOSThermalPressureLevelHeavy)
NUMBER(const__kOSThermalPressureLevelTrapping, kOSThermalPressureLevelTrapping)
NUMBER(const__kOSThermalPressureLevelSleeping, kOSThermalPressureLevelSleeping)
