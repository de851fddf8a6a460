package netsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Topology names the shape of the network of bridges.
type Topology string

// The topologies. Each undirected edge {a, b} is a duplex link: a bridge with
// local a and remote b and one with local b and remote a, as a duplex
// networkConnector (or two sidecars) would make.
const (
	// Ring links broker i with i+1 (mod N).
	Ring Topology = "ring"
	// Tree is a balanced binary tree: broker i's parent is (i-1)/2.
	Tree Topology = "tree"
	// Random is a random connected graph in which every broker has Degree
	// neighbours (a random regular graph, drawn from the seed).
	Random Topology = "random"
	// Mesh links every broker with every other.
	Mesh Topology = "mesh"
)

// Topologies lists the topologies in the order reports show them.
var Topologies = []Topology{Ring, Tree, Random, Mesh}

// ParseTopology returns the named topology, "random-K" setting the degree K.
func ParseTopology(s string) (Topology, int, error) {
	if rest, ok := strings.CutPrefix(s, "random-"); ok {
		k, err := strconv.Atoi(rest)
		if err != nil || k < 1 {
			return "", 0, fmt.Errorf("topology %q: the degree after random- must be a positive integer", s)
		}
		return Random, k, nil
	}
	for _, t := range Topologies {
		if string(t) == s {
			return t, 0, nil
		}
	}
	return "", 0, fmt.Errorf("unknown topology %q (want ring, tree, random-K or mesh)", s)
}

// Edge is an undirected link between two brokers, by index, A < B.
type Edge struct{ A, B int }

// Edges returns the links of topology t over n brokers; degree is used by
// Random only. The result is sorted and deterministic for a given rng state.
func Edges(t Topology, n, degree int, rng *rand.Rand) ([]Edge, error) {
	if n < 2 {
		return nil, fmt.Errorf("%d brokers: a network needs at least 2", n)
	}
	var edges []Edge
	switch t {
	case Ring:
		for i := range n {
			j := (i + 1) % n
			if n == 2 && i == 1 {
				break // two brokers make one link, not two
			}
			edges = append(edges, edge(i, j))
		}
	case Tree:
		for i := 1; i < n; i++ {
			edges = append(edges, edge((i-1)/2, i))
		}
	case Mesh:
		for i := range n {
			for j := i + 1; j < n; j++ {
				edges = append(edges, Edge{i, j})
			}
		}
	case Random:
		var err error
		if edges, err = regular(n, degree, rng); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown topology %q", t)
	}
	slices.SortFunc(edges, func(a, b Edge) int {
		if a.A != b.A {
			return a.A - b.A
		}
		return a.B - b.B
	})
	return edges, nil
}

func edge(a, b int) Edge {
	if a > b {
		a, b = b, a
	}
	return Edge{a, b}
}

// regular draws a connected simple k-regular graph by the configuration
// model: pair the n*k half-edges at random and start again on a loop, a
// double edge or a disconnected result. For k ≤ 4 a try succeeds with a
// probability of about exp(-(k²-1)/4) ≥ 2%, so the bound of tries is ample.
func regular(n, k int, rng *rand.Rand) ([]Edge, error) {
	switch {
	case k < 1 || k >= n:
		return nil, fmt.Errorf("degree %d with %d brokers: want 1 ≤ degree < brokers", k, n)
	case n*k%2 != 0:
		return nil, fmt.Errorf("degree %d with %d brokers: brokers × degree must be even", k, n)
	case k == 1 && n > 2:
		return nil, fmt.Errorf("degree 1 with %d brokers cannot be connected", n)
	}
	stubs := make([]int, 0, n*k)
	for i := range n {
		for range k {
			stubs = append(stubs, i)
		}
	}
	for range 10000 {
		rng.Shuffle(len(stubs), func(i, j int) { stubs[i], stubs[j] = stubs[j], stubs[i] })
		seen := make(map[Edge]bool, len(stubs)/2)
		ok := true
		for i := 0; i < len(stubs); i += 2 {
			e := edge(stubs[i], stubs[i+1])
			if e.A == e.B || seen[e] {
				ok = false
				break
			}
			seen[e] = true
		}
		if !ok {
			continue
		}
		edges := make([]Edge, 0, len(seen))
		for e := range seen {
			edges = append(edges, e)
		}
		if connected(n, edges) {
			return edges, nil
		}
	}
	return nil, fmt.Errorf("no connected %d-regular graph on %d brokers found in 10000 tries", k, n)
}

// connected reports whether edges join all n brokers.
func connected(n int, edges []Edge) bool {
	adj := make([][]int, n)
	for _, e := range edges {
		adj[e.A] = append(adj[e.A], e.B)
		adj[e.B] = append(adj[e.B], e.A)
	}
	seen := make([]bool, n)
	stack := []int{0}
	seen[0] = true
	count := 1
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range adj[v] {
			if !seen[w] {
				seen[w] = true
				count++
				stack = append(stack, w)
			}
		}
	}
	return count == n
}
