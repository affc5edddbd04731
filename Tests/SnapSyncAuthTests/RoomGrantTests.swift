import Testing
@testable import SnapSyncAuth

/// Grant matching: exact names, trailing-`*` prefixes, nothing else special.
@Suite struct RoomGrantTests {
    private func grant(_ spec: String) throws -> RoomGrant { try RoomGrant(spec: spec) }

    @Test func exactMatchIsByteForByte() throws {
        let exact = try grant("board:42=read")
        #expect(exact.matches(room: "board:42"))
        #expect(!exact.matches(room: "board:420"))
        #expect(!exact.matches(room: "board:4"))
        #expect(!exact.matches(room: "Board:42"))
        #expect(!exact.matches(room: ""))
        // No Unicode equivalence: e + combining acute is not é, though Swift's == says so.
        let accented = try grant("caf\u{E9}=read")
        #expect("cafe\u{301}" == "caf\u{E9}")
        #expect(accented.matches(room: "caf\u{E9}"))
        #expect(!accented.matches(room: "cafe\u{301}"))
    }

    @Test func trailingStarIsAPrefix() throws {
        let prefix = try grant("board:*=read")
        #expect(prefix.matches(room: "board:"))
        #expect(prefix.matches(room: "board:42"))
        #expect(prefix.matches(room: "board:*"))
        #expect(!prefix.matches(room: "board"))
        #expect(!prefix.matches(room: "boards:1"))
        #expect(!prefix.matches(room: "xboard:1"))
    }

    @Test func starAloneMatchesEveryRoom() throws {
        let all = try grant("*=read")
        for room in ["", "a", "board:42", "*", "🙂"] { #expect(all.matches(room: room)) }
    }

    @Test func otherCharactersMeanThemselves() throws {
        let dots = try grant("a.c=read")
        #expect(dots.matches(room: "a.c"))
        #expect(!dots.matches(room: "abc"))
        let regex = try grant("[ab]+?=read")
        #expect(regex.matches(room: "[ab]+?"))
        #expect(!regex.matches(room: "a"))
        let caret = try grant("^board$*=read")
        #expect(caret.matches(room: "^board$1"))
        #expect(!caret.matches(room: "board1"))
        #expect(try grant("a=b=read").matches(room: "a=b"))
    }

    @Test func starOnlyAtTheEnd() {
        #expect(throws: GrantError.self) { try RoomGrant(spec: "*board=read") }
        #expect(throws: GrantError.self) { try RoomGrant(spec: "bo*ard=read") }
        #expect(throws: GrantError.self) { try RoomGrant(spec: "**=read") }
        #expect(throws: GrantError.self) { try RoomGrant(spec: "=read") }
    }

    @Test func specRights() throws {
        #expect(try grant("r=read,write,admin").rights == [.read, .write, .admin])
        #expect(throws: GrantError("unknown right \"delete\" in \"r=read,delete\" (read, write, admin)")) { try RoomGrant(spec: "r=read,delete") }
        #expect(throws: GrantError.self) { try RoomGrant(spec: "r=") }
        #expect(throws: GrantError.self) { try RoomGrant(spec: "r=read,") }
        #expect(throws: GrantError.self) { try RoomGrant(spec: "r") }
    }

    @Test func principalNeedsTheRightInAMatchingGrant() async throws {
        let keys = try await AuthFixtures.keys()
        let claims = try AuthFixtures.claims(grants: ["board:1=read", "board:*=write", "stats=admin"])
        let principal = try TokenVerifier(keys: keys).verify(try await keys.mint(claims, keyID: "hs"), now: AuthFixtures.now)
        #expect(principal.allows(.read, room: "board:1"))
        #expect(principal.allows(.write, room: "board:1"))
        #expect(!principal.allows(.read, room: "board:2"))
        #expect(principal.allows(.write, room: "board:2"))
        #expect(!principal.allows(.admin, room: "board:1"))
        #expect(principal.allows(.admin, room: "stats"))
        #expect(!principal.allows(.read, room: "stats"))
        let none = try TokenVerifier(keys: keys).verify(try await keys.mint(AuthFixtures.claims(grants: []), keyID: "hs"), now: AuthFixtures.now)
        #expect(!none.allows(.read, room: "board:1"))
    }
}
