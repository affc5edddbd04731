/// One unsent span of an output queue (`OutputQueue.gather`), laid out as POSIX's
/// `struct iovec` (`void *iov_base; size_t iov_len`): the IO layer hands an array of them to
/// sendmsg as it is (`Syscall.send` checks the layout), so the hub, which imports no C module,
/// fills the very array the kernel reads, with no copy per span.
package struct OutputSpan {
    package var base: UnsafeMutableRawPointer?
    package var count: Int

    package init(base: UnsafeMutableRawPointer?, count: Int) {
        self.base = base
        self.count = count
    }

    /// The span's bytes.
    package var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}
