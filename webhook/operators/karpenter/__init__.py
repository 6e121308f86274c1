"""Karpenter: Airlock reads none of its pods, and marks some so its consolidation leaves
them be."""
