/// Sequences kept as implicit treaps (randomized balanced binary trees ordered by position, each
/// node counting its subtree) in one node pool, with parent links: the ordered lists behind
/// `SnapshotPositions`.
///
/// A sequence is named by its root (`none` when empty); operations that restructure a tree
/// take its root `inout`. Positions are found by walking down (`select`), and a node's position
/// by walking up (`rank`): both O(log n) expected, as are insertion and removal. Nodes are
/// reused through a free list, so the pool never shrinks but never holds more than the largest
/// count of live nodes.
struct RankedForest: Sendable {
    typealias Node = Int32
    static let none: Node = -1

    private struct Links: Sendable {
        var left: Node = RankedForest.none
        var right: Node = RankedForest.none
        var parent: Node = RankedForest.none
        var size: Int32 = 1
        var priority: UInt64 = 0
    }
    private var links: [Links] = []
    private var free: [Node] = []
    /// SplitMix64 state for the priorities: a fixed seed keeps runs reproducible.
    private var seed: UInt64 = 0x9E37_79B9_7F4A_7C15

    init() {}

    /// A fresh node, in no tree yet.
    mutating func makeNode() -> Node {
        seed &+= 0x9E37_79B9_7F4A_7C15
        var z = seed
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        let fresh = Links(priority: z ^ (z >> 31))
        if let node = free.popLast() {
            links[Int(node)] = fresh
            return node
        }
        links.append(fresh)
        return Node(links.count - 1)
    }

    /// Returns a node (already removed from its tree) to the pool.
    mutating func release(_ node: Node) {
        free.append(node)
    }

    /// Forgets every node.
    mutating func removeAll() {
        links.removeAll(keepingCapacity: true)
        free.removeAll(keepingCapacity: true)
    }

    func count(_ root: Node) -> Int { root == Self.none ? 0 : Int(links[Int(root)].size) }

    /// The node at `position` in the tree `root`, or `none` when out of range. O(log n).
    func select(_ root: Node, _ position: Int) -> Node {
        guard position >= 0, position < count(root) else { return Self.none }
        var node = root, k = position
        while true {
            let leftCount = count(links[Int(node)].left)
            if k < leftCount {
                node = links[Int(node)].left
            } else if k == leftCount {
                return node
            } else {
                k -= leftCount + 1
                node = links[Int(node)].right
            }
        }
    }

    /// The position of `node` in its tree. O(log n).
    func rank(_ node: Node) -> Int {
        var position = count(links[Int(node)].left)
        var child = node, parent = links[Int(node)].parent
        while parent != Self.none {
            if links[Int(parent)].right == child { position += count(links[Int(parent)].left) + 1 }
            child = parent
            parent = links[Int(parent)].parent
        }
        return position
    }

    /// Puts `node` (in no tree) at `position` (0...count) of the tree `root`. O(log n).
    mutating func insert(_ node: Node, at position: Int, into root: inout Node) {
        precondition(position >= 0 && position <= count(root), "RankedForest: position \(position) out of 0...\(count(root))")
        let (before, after) = split(root, position)
        root = merge(merge(before, node), after)
        links[Int(root)].parent = Self.none
    }

    /// A tree of `nodes` (fresh, in no tree), in that order: the treap their priorities make,
    /// built in O(n) (a Cartesian tree grown along its right spine), rather than O(n log n) by
    /// inserting them one at a time.
    mutating func tree(of nodes: [Node]) -> Node {
        var spine: [Node] = []
        for node in nodes {
            var lastPopped = Self.none
            while let top = spine.last, links[Int(top)].priority < links[Int(node)].priority {
                lastPopped = spine.removeLast()
            }
            links[Int(node)].left = lastPopped
            if lastPopped != Self.none { links[Int(lastPopped)].parent = node }
            if let top = spine.last {
                links[Int(top)].right = node
                links[Int(node)].parent = top
            }
            spine.append(node)
        }
        guard let root = spine.first else { return Self.none }
        links[Int(root)].parent = Self.none
        // Sizes bottom-up: children before parents (an iterative post-order walk).
        var stack: [(node: Node, childrenDone: Bool)] = [(root, false)]
        while let (node, childrenDone) = stack.popLast() {
            if childrenDone {
                links[Int(node)].size = Int32(1 + count(links[Int(node)].left) + count(links[Int(node)].right))
            } else {
                stack.append((node, true))
                if links[Int(node)].left != Self.none { stack.append((links[Int(node)].left, false)) }
                if links[Int(node)].right != Self.none { stack.append((links[Int(node)].right, false)) }
            }
        }
        return root
    }

    /// Takes `node` out of the tree `root`, which it must be in. O(log n).
    mutating func remove(_ node: Node, from root: inout Node) {
        let parent = links[Int(node)].parent
        let joined = merge(links[Int(node)].left, links[Int(node)].right)
        if joined != Self.none { links[Int(joined)].parent = parent }
        if parent == Self.none {
            root = joined
        } else {
            if links[Int(parent)].left == node { links[Int(parent)].left = joined } else { links[Int(parent)].right = joined }
            var up = parent
            while up != Self.none {
                links[Int(up)].size -= 1
                up = links[Int(up)].parent
            }
        }
        links[Int(node)].left = Self.none
        links[Int(node)].right = Self.none
        links[Int(node)].parent = Self.none
        links[Int(node)].size = 1
    }

    /// Every node of the tree `root`, in order. O(n).
    func nodes(_ root: Node) -> [Node] {
        var result: [Node] = [], stack: [Node] = []
        var node = root
        while node != Self.none || !stack.isEmpty {
            while node != Self.none {
                stack.append(node)
                node = links[Int(node)].left
            }
            node = stack.removeLast()
            result.append(node)
            node = links[Int(node)].right
        }
        return result
    }

    /// Recounts `node` from its children and makes it their parent.
    private mutating func update(_ node: Node) {
        let left = links[Int(node)].left, right = links[Int(node)].right
        links[Int(node)].size = Int32(1 + count(left) + count(right))
        if left != Self.none { links[Int(left)].parent = node }
        if right != Self.none { links[Int(right)].parent = node }
    }

    /// The first `k` nodes of `root`, and the rest. Recursion depth O(log n) expected.
    private mutating func split(_ root: Node, _ k: Int) -> (Node, Node) {
        guard root != Self.none else { return (Self.none, Self.none) }
        let leftCount = count(links[Int(root)].left)
        if k <= leftCount {
            let (a, b) = split(links[Int(root)].left, k)
            links[Int(root)].left = b
            update(root)
            if a != Self.none { links[Int(a)].parent = Self.none }
            return (a, root)
        } else {
            let (a, b) = split(links[Int(root)].right, k - leftCount - 1)
            links[Int(root)].right = a
            update(root)
            if b != Self.none { links[Int(b)].parent = Self.none }
            return (root, b)
        }
    }

    /// `a`'s nodes followed by `b`'s. Recursion depth O(log n) expected.
    private mutating func merge(_ a: Node, _ b: Node) -> Node {
        if a == Self.none { return b }
        if b == Self.none { return a }
        if links[Int(a)].priority > links[Int(b)].priority {
            links[Int(a)].right = merge(links[Int(a)].right, b)
            update(a)
            return a
        } else {
            links[Int(b)].left = merge(a, links[Int(b)].left)
            update(b)
            return b
        }
    }
}
